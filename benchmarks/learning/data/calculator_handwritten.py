"""Writes calculator-handwritten.jsonl: 40 arithmetic word problems written by hand, phrased unlike the calculator generator (no
'packs of', other verbs, units, order of facts, distractor-free). Each has the expression its
answer is computed from (the answer is computed here, never typed)."""
import json
from fractions import Fraction
from pathlib import Path

PROBLEMS = [
    ("A school orders 14 boxes of chalk with 36 sticks in each box. After a term, 129 sticks are used up. How many sticks remain?", "14*36-129"),
    ("Each of the 23 rows in a theatre has 18 seats. On Friday 97 seats stay empty. How many people attend on Friday?", "23*18-97"),
    ("A farmer plants 12 rows of 45 tulips and later adds 88 more tulips along the fence. How many tulips does she plant in total?", "12*45+88"),
    ("A printer prints 37 pages a minute. How many pages does it print in 16 minutes if 54 pages jam and must be thrown away?", "37*16-54"),
    ("Marta saves 125 dollars every month for 11 months, then spends 480 dollars on a bicycle. How much money does she have left?", "125*11-480"),
    ("A bus makes 7 trips a day carrying 52 passengers each trip. Over 5 days, how many passengers does it carry?", "7*52*5"),
    ("A bakery bakes 240 rolls in the morning and 175 in the afternoon, then sells 389 of them. How many rolls are unsold?", "240+175-389"),
    ("The distance between two towns is 148 km. A courier drives there and back 6 times. How many kilometres does he drive?", "148*2*6"),
    ("A tank holds 1,200 litres. A pump removes 35 litres a minute for 19 minutes. How many litres are still in the tank?", "1200-35*19"),
    ("Leo reads 27 pages every evening. After 13 evenings he has 49 pages of his book left. How many pages does the book have?", "27*13+49"),
    ("A shop receives 8 crates of 64 eggs. 23 eggs arrive broken. How many whole eggs does the shop get?", "8*64-23"),
    ("A hotel has 9 floors with 26 rooms on each floor. 31 rooms are being repaired. How many rooms can guests use?", "9*26-31"),
    ("Three friends share the cost of a 1,440 dollar holiday equally. How much does each friend pay?", "1440/3"),
    ("A cyclist rides 18 km each weekday and 45 km on Saturday. How far does she ride in one week if she rests on Sunday?", "18*5+45"),
    ("A gardener has 615 seeds. He puts 15 seeds in each pot. How many pots does he fill?", "615/15"),
    ("An orchard has 17 trees, each giving 132 apples. 260 apples are too small to sell. How many apples can be sold?", "17*132-260"),
    ("A train carries 408 passengers. At the first stop 67 get off and 125 get on. How many passengers are on the train now?", "408-67+125"),
    ("Sam earns 14 dollars an hour and works 38 hours. He pays 95 dollars for transport. What does he keep?", "14*38-95"),
    ("A recipe needs 250 grams of flour per cake. How much flour, in grams, do 13 cakes need, plus 180 grams for dusting the tables?", "250*13+180"),
    ("A warehouse stores 3,500 bottles. It ships 28 pallets of 96 bottles. How many bottles are left in the warehouse?", "3500-28*96"),
    ("Each packet of seeds costs 3 dollars. Nina buys 47 packets and pays with a 200 dollar note. How much change does she get?", "200-3*47"),
    ("A parking garage has 6 levels of 85 spaces. 379 cars are parked. How many spaces are free?", "6*85-379"),
    ("A choir of 42 singers each needs 3 folders and 2 pencils. How many folders and pencils are needed altogether?", "42*(3+2)"),
    ("A runner runs 400 metres laps. She completes 23 laps and then walks 650 metres. How many metres does she cover?", "400*23+650"),
    ("A library had 1,250 books. It lends out 387 and receives 9 boxes of 24 new books. How many books are on its shelves now?", "1250-387+9*24"),
    ("A factory makes 275 toys a day. How many toys does it make in 4 weeks of 6 working days?", "275*6*4"),
    ("The temperature is 17 degrees at noon and falls 3 degrees every hour for 8 hours. What is it then?", "17-3*8"),
    ("Ana has 5 jars with 73 buttons each and gives 2 jars to her sister. How many buttons does Ana keep?", "(5-2)*73"),
    ("A team scores 38 points in each of its first 11 games and 55 points in the 12th. How many points does it score in all?", "38*11+55"),
    ("A cinema sells 164 tickets at 9 dollars and 58 tickets at 6 dollars. How much money does it take in?", "164*9+58*6"),
    ("A builder needs 2,400 bricks. He has 36 pallets with 60 bricks on each. How many more bricks does he need?", "2400-36*60"),
    ("Seven classes of 29 pupils go on a trip; each bus seats 50. How many empty seats are there on 5 buses?", "5*50-7*29"),
    ("A bookshelf has 6 shelves holding 34 books each. Tom removes 47 books and adds 19. How many books are on the shelf?", "6*34-47+19"),
    ("A phone plan costs 23 dollars a month plus 60 dollars to start. What does a year on the plan cost?", "23*12+60"),
    ("A pool is filled at 48 litres a minute for 35 minutes and then 210 litres are drained. How much water is in it?", "48*35-210"),
    ("A ferry can carry 96 cars. It makes 14 full crossings and one crossing with 37 cars. How many cars does it carry?", "96*14+37"),
    ("A box of 24 pencils costs 6 dollars. A teacher needs 360 pencils. How many dollars does she pay?", "360/24*6"),
    ("A marathon of 42 km is run by 128 people and a 10 km race by 317 people. How many kilometres are run in all?", "42*128+10*317"),
    ("A baker uses 4 eggs per cake and has 10 dozen eggs. After baking 21 cakes, how many eggs are left?", "10*12-4*21"),
    ("A museum has 1,875 visitors on Saturday and 248 fewer on Sunday. How many visitors does it have over the weekend?", "1875+(1875-248)"),
]


def value(expr: str) -> Fraction:
    import ast

    def walk(n):
        if isinstance(n, ast.Expression):
            return walk(n.body)
        if isinstance(n, ast.Constant):
            return Fraction(n.value)
        if isinstance(n, ast.BinOp):
            a, b = walk(n.left), walk(n.right)
            return {ast.Add: a + b, ast.Sub: a - b, ast.Mult: a * b, ast.Div: a / b if b else None}[type(n.op)]
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
            return -walk(n.operand)
        raise ValueError(expr)
    return walk(ast.parse(expr, mode="eval"))


assert len(PROBLEMS) == 40 and len({q for q, _ in PROBLEMS}) == 40
out = Path(__file__).resolve().parent / "calculator-handwritten.jsonl"
with out.open("w") as fh:
    for i, (question, expr) in enumerate(PROBLEMS):
        v = value(expr)
        assert v.denominator == 1, (question, v)
        fh.write(json.dumps({"id": f"hand-{i:02d}", "question": question, "answers": [str(v.numerator)],
                             "meta": {"expression": expr, "source": "written by hand (issue 33)"}}) + "\n")
print(out, sum(1 for _ in out.open()))
