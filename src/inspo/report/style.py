"""The report page's stylesheet, inline in its ``<style>`` (the page loads nothing): the layout,
the header tiles, the charts and legends, the lineage tree and its diffs, the tables."""

CSS = """
:root { --fg: #1d2330; --muted: #5b6475; --line: #d9dde5; --bg: #ffffff; --panel: #f6f7f9; }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg);
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", Roboto, sans-serif; }
main { max-width: 960px; margin: 0 auto; padding: 20px 24px 60px; }
h1 { font-size: 24px; margin: 0 0 4px; }
h2 { font-size: 19px; margin: 34px 0 10px; padding-bottom: 4px; border-bottom: 2px solid \
var(--line); }
h3 { font-size: 15px; margin: 18px 0 6px; }
h4 { font-size: 13px; margin: 12px 0 4px; color: var(--muted); text-transform: uppercase; \
letter-spacing: .04em; }
.path, .meta, figcaption { color: var(--muted); font-size: 12.5px; }
nav { margin: 10px 0; display: flex; flex-wrap: wrap; gap: 6px 14px; }
nav a { color: #1f5fbf; text-decoration: none; }
.tiles { display: grid; grid-template-columns: repeat(auto-fill, minmax(170px, 1fr)); gap: 8px; \
margin-top: 10px; }
.tile { background: var(--panel); border: 1px solid var(--line); border-radius: 6px; padding: 8px \
10px; }
.tile .k { color: var(--muted); font-size: 11.5px; text-transform: uppercase; letter-spacing: \
.03em; }
.tile .v { font-size: 16px; font-weight: 600; word-break: break-word; }
.notes { background: #fff8e6; border: 1px solid #f0d9a0; border-radius: 6px; padding: 8px 14px; \
margin-top: 14px; }
.notes ul { margin: 4px 0 0; padding-left: 20px; }
.nr { color: #a15c00; font-style: italic; font-weight: normal; }
figure { margin: 14px 0 20px; }
svg.chart { display: block; max-width: 100%; height: auto; font-family: inherit; }
svg.chart .plot-bg { fill: #fbfbfc; stroke: none; }
svg.chart .grid { stroke: #e7e9ee; stroke-width: 1; }
svg.chart .axis { stroke: #8a93a3; stroke-width: 1; }
svg.chart .tick { font-size: 11px; fill: #5b6475; }
svg.chart .axis-label { font-size: 12px; fill: #3b4352; }
svg.chart .chart-title { font-size: 13.5px; font-weight: 600; fill: #1d2330; }
.chart-empty { background: var(--panel); border: 1px dashed var(--line); padding: 14px; \
border-radius: 6px;
  color: var(--muted); margin: 10px 0; }
.legend { display: flex; flex-wrap: wrap; gap: 4px 14px; font-size: 12px; margin: 4px 0 0 62px; }
.legend.flush { margin-left: 0; }
.legend-item { display: inline-flex; align-items: center; gap: 5px; }
.legend .sw { display: inline-block; width: 12px; height: 12px; border-radius: 2px; }
pre { white-space: pre-wrap; word-wrap: break-word; margin: 6px 0; font: 12.5px/1.45 ui-monospace,
  "DejaVu Sans Mono", Menlo, Consolas, monospace; }
pre.text, pre.critique { background: var(--panel); border: 1px solid var(--line); border-radius: \
6px; padding: 10px 12px; }
pre.best { border-left: 4px solid #2ca02c; }
pre.response { max-height: 180px; overflow: auto; font-size: 11.5px; margin: 0; }
ul.tree { list-style: none; margin: 0; padding-left: 18px; border-left: 2px solid var(--line); }
ul.tree.root { padding-left: 0; border-left: none; }
ul.tree li { margin: 6px 0; }
.node { border: 1px solid var(--line); border-radius: 6px; padding: 6px 10px; background: #fff; }
.node.best-path { border-color: #9bd09b; background: #fbfef9; }
.node-head { font-size: 13px; }
details { margin: 4px 0; }
summary { cursor: pointer; color: #2f4a7a; font-size: 12.5px; }
.diff { white-space: pre-wrap; font: 12.5px/1.5 ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, \
monospace;
  background: var(--panel); border: 1px solid var(--line); border-radius: 6px; padding: 8px 10px; }
ins { background: #d5f5d5; color: #0b5d1e; text-decoration: none; }
del { background: #fbd9d9; color: #8d1c1c; }
.skip { color: var(--muted); font-style: italic; }
.plus { color: #0b7d2a; } .minus { color: #b3261e; }
.badge { display: inline-block; font-size: 11px; border-radius: 10px; padding: 0 7px; margin-left: \
4px; }
.badge.alive { background: #e1f3e1; color: #1f6f1f; }
.badge.gone { background: #eceef2; color: #5b6475; }
.badge.best { background: #2ca02c; color: #fff; }
table { border-collapse: collapse; width: 100%; font-size: 12.5px; margin: 4px 0 10px; }
th, td { border: 1px solid var(--line); padding: 4px 7px; text-align: left; vertical-align: top; }
th { background: var(--panel); font-weight: 600; }
table.ledger th { width: 42%; }
table.failures { table-layout: fixed; }
table.failures th:nth-child(1) { width: 22%; } table.failures th:nth-child(2) { width: 10%; }
table.failures th:nth-child(3) { width: 14%; } table.failures th:nth-child(4) { width: 7%; }
table.failures th:nth-child(5) { width: 10%; }
.qid { color: var(--muted); font-size: 11px; }
.status-admitted { color: #1f6f1f; font-weight: 600; } .status-rejected { color: #8d1c1c; }
.round { border-top: 1px dashed var(--line); padding-top: 4px; }
svg.bar { display: block; max-width: 100%; border-radius: 4px; }
"""
