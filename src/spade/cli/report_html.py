"""HTML pieces of ``spade report``: one self-contained page (inline CSS, inline JS, inline SVG; no network)."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

from spade.cli.report_charts import Chart
from spade.memory.archive import EnvRecord, HistoryPoint
from spade.types import plural, status_words

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1200px;padding:0 16px;color:#222}
h1{margin:18px 0 4px}h2{margin-top:32px;border-bottom:1px solid #ddd}
.meta{color:#555}.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(540px,1fr));gap:12px}
figure.chart{margin:0;border:1px solid #e3e3e3;border-radius:6px;padding:6px}
figure.chart figcaption{font-weight:600}figure.chart svg{width:100%;height:auto}
table{border-collapse:collapse;width:100%}th,td{border-bottom:1px solid #eee;padding:4px 6px;text-align:left;
vertical-align:top}th{cursor:pointer;background:#f6f6f6;position:sticky;top:0}
tr.detail>td{background:#fafafa}.valid{color:#2a7d2a}.rejected{color:#b23}.evicted{color:#888}
pre{white-space:pre-wrap;word-break:break-word;margin:4px 0}.src{max-height:480px;overflow:auto;
border:1px solid #eee}.msg{border-radius:8px;padding:6px 10px;margin:6px 0;max-width:90%}
.msg.context{background:#f1f3f5}.msg.assistant{background:#e3f0ff;margin-left:8%}
.msg .who{font-size:11px;color:#666;text-transform:uppercase}.tag{display:inline-block;padding:0 6px;
border-radius:8px;background:#eee;font-size:12px;margin-right:4px}.win{background:#d4f5d4}
input#filter{width:320px;padding:4px;margin:6px 0}
"""

JS = """
(function(){
  var input=document.getElementById('filter');
  var table=document.getElementById('archive-table');
  if(!input||!table){return;}
  var body=table.tBodies[0];
  function rows(){return Array.prototype.filter.call(body.rows,function(r){return r.classList.contains('rec');});}
  input.addEventListener('input',function(){
    var q=input.value.toLowerCase();
    rows().forEach(function(r){
      var show=r.textContent.toLowerCase().indexOf(q)>=0;
      r.style.display=show?'':'none';
      var d=r.nextElementSibling; if(d&&!show){d.style.display='none';}
    });
  });
  Array.prototype.forEach.call(table.tHead.rows[0].cells,function(th,i){
    th.addEventListener('click',function(){
      var asc=th.dataset.asc!=='1'; th.dataset.asc=asc?'1':'0';
      var pairs=rows().map(function(r){return [r,r.nextElementSibling];});
      pairs.sort(function(a,b){
        var x=a[0].cells[i].dataset.v||a[0].cells[i].textContent, y=b[0].cells[i].dataset.v||b[0].cells[i].textContent;
        var nx=parseFloat(x), ny=parseFloat(y);
        var c=(!isNaN(nx)&&!isNaN(ny))?nx-ny:x.localeCompare(y);
        return asc?c:-c;
      });
      pairs.forEach(function(p){body.appendChild(p[0]); if(p[1]){body.appendChild(p[1]);}});
    });
  });
  Array.prototype.forEach.call(document.querySelectorAll('tr.rec'),function(r){
    r.addEventListener('click',function(e){
      if(e.target.tagName==='A'){return;}
      var d=r.nextElementSibling; if(d){d.style.display=d.style.display==='none'?'':'none';}
    });
  });
})();
"""


def highlighter() -> tuple[Any, str]:
    """A function ``code -> html`` (pygments when installed, else escaped text) and its CSS."""
    try:
        from pygments import highlight  # noqa: PLC0415 - optional; a rich/transformers dependency
        from pygments.formatters import HtmlFormatter  # noqa: PLC0415
        from pygments.lexers import PythonLexer  # noqa: PLC0415
    except ImportError:
        return (lambda code: f"<pre>{escape(code)}</pre>"), ""
    formatter = HtmlFormatter(cssclass="hl")
    return (lambda code: highlight(code, PythonLexer(), formatter)), formatter.get_style_defs(".hl")


def charts(items: Sequence[Chart]) -> str:
    """The chart grid."""
    figs = [
        f'<figure class="chart" data-chart="{c.key}"><figcaption>{escape(c.title)}</figcaption>{c.svg}</figure>'
        for c in items
    ]
    return '<div class="grid">' + "".join(figs) + "</div>" if figs else "<p>No metrics yet.</p>"


def _fmt(value: float | None, spec: str = ".2f") -> str:
    return "–" if value is None else format(value, spec)


def _findings(record: EnvRecord) -> str:
    if not record.findings:
        return "<p>No findings.</p>"
    items = "".join(f"<li><b>{escape(f.code)}</b>: {escape(f.message)}</li>" for f in record.findings)
    return f"<ul>{items}</ul>"


def _history(points: Sequence[HistoryPoint]) -> str:
    if not points:
        return "never played"
    return ", ".join(
        f"step {p.step}: win {p.win_rate:.2f}"
        + (f" / regret {p.regret:+.2f}" if p.regret is not None else "")
        + f" ({plural(p.plays, 'play')})"
        for p in points
    )


def archive_table(
    records: Sequence[EnvRecord],
    history: dict[str, list[HistoryPoint]],
    children: dict[str, list[str]],
    episodes: dict[str, str],
    hl: Any,
) -> str:
    """The browsable archive: one row per environment, a click opens its details."""
    head = "".join(
        f"<th>{h}</th>"
        for h in ("env id", "status", "skill", "parent", "created", "win rate", "regret", "plays", "hint")
    )
    body = []
    for r in records:
        plays = sum(p.plays for p in history.get(r.env_id, []))
        parent = f'<a href="#env-{escape(r.parent_id)}">{escape(r.parent_id)}</a>' if r.parent_id else ""
        kids = ", ".join(f'<a href="#env-{escape(k)}">{escape(k)}</a>' for k in children.get(r.env_id, []))
        body.append(
            f'<tr class="rec" id="env-{escape(r.env_id)}"><td>{escape(r.env_id)}</td>'
            f'<td class="{r.status.value}">{r.status.value}</td><td>{escape(r.skill)}</td><td>{parent}</td>'
            f'<td data-v="{r.created_step}">{r.created_step}</td><td>{_fmt(r.win_rate)}</td>'
            f"<td>{_fmt(r.regret, '+.2f')}</td><td>{plays}</td><td>{'yes' if r.hint else ''}</td></tr>"
        )
        body.append(
            '<tr class="detail" style="display:none"><td colspan="9">'
            f"<p><b>Lineage</b>: parent {parent or '–'} → this → children {kids or '–'}; "
            f"document {escape(r.doc_id or '–')}; seed library: {'yes' if r.is_seed else 'no'}</p>"
            f"<p><b>Win-rate history</b>: {_history(history.get(r.env_id, []))}</p>"
            f"<p><b>Hint</b>: {escape(r.hint) or '–'}</p><b>Findings</b>{_findings(r)}"
            f'<details><summary>Source ({len(r.code)} characters)</summary><div class="src">{hl(r.code)}</div>'
            f"</details>{episodes.get(r.env_id, '')}</td></tr>"
        )
    return (
        '<input id="filter" placeholder="filter (id, skill, status…)">'
        f'<table id="archive-table"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'
    )


def rejected_list(designs: Sequence[dict[str, Any]], hl: Any) -> str:
    """Rejected designer replies with their findings (from the design transcripts)."""
    if not designs:
        return "<p>No rejected designs recorded.</p>"
    out = []
    for d in designs:
        findings = (
            "".join(
                f"<li><b>{escape(f['code'])}</b> ({escape(f['stage'])}): {escape(f['message'])}</li>"
                for f in d.get("findings", [])
            )
            or f"<li>{escape(str(d.get('extract', '')))}</li>"
        )
        out.append(
            f"<details><summary>step {d['step']} · {escape(d['env_id'])} · {escape(d.get('mode', ''))} · "
            f"<b>{escape(d.get('reason', ''))}</b></summary><ul>{findings}</ul>"
            f'<details><summary>Designer reply</summary><div class="src"><pre>{escape(d.get("reply", ""))}'
            "</pre></div></details></details>"
        )
    return "".join(out)


def transcript(record: dict[str, Any]) -> str:
    """One episode as a chat: what the model was shown and what it answered, with actions and rewards."""
    tags = [
        f"step {record['step']}",
        f"seed {record['seed']}",
        "hinted" if record["hinted"] else "no hint",
        f"return {record['return']:+.2f}",
        f"ended: {status_words(record['status'])}",
    ]
    tag_html = "".join(
        f'<span class="tag{" win" if record["success"] and i == 3 else ""}">{escape(str(t))}</span>'
        for i, t in enumerate(tags)
    )
    msgs = []
    turns = record.get("turns", [])
    k = 0
    for seg in record.get("segments", []):
        extra = ""
        if seg["role"] == "assistant" and k < len(turns):
            extra = f'<div class="who">action {escape(turns[k]["action"])!s} · reward {turns[k]["reward"]:+.2f}</div>'
            k += 1
        who = "model" if seg["role"] == "assistant" else "shown to the model"
        msgs.append(
            f'<div class="msg {seg["role"]}"><div class="who">{who}</div><pre>{escape(seg["content"])}</pre>'
            f"{extra}</div>"
        )
    if record.get("final_observation"):
        msgs.append(
            '<div class="msg context"><div class="who">the environment ends the episode</div>'
            f"<pre>{escape(record['final_observation'])}</pre></div>"
        )
    error = f"<p class='rejected'>{escape(record['error'])}</p>" if record.get("error") else ""
    return f"<details><summary>{tag_html}</summary>{''.join(msgs)}{error}</details>"


def page(title: str, meta: str, sections: Sequence[tuple[str, str]], extra_css: str) -> str:
    """The whole document."""
    nav = " · ".join(f'<a href="#{key}">{escape(key.capitalize())}</a>' for key, _ in sections)
    body = "".join(
        f'<section id="{key}"><h2>{escape(key.capitalize())}</h2>{html}</section>' for key, html in sections
    )
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{CSS}{extra_css}</style></head><body>"
        f"<h1>{escape(title)}</h1><p class='meta'>{meta}</p><p>{nav}</p>{body}<script>{JS}</script></body></html>"
    )
