"""The DOT text the widgets hand to the browser (no browser needed)."""
import html
import re

import numpy as np

import minigrad as mg
from minigrad.widgets._base import too_big_message
from minigrad.widgets.dot import to_dot


def small_trace():
    W = mg.create_leaf(np.ones((3, 2)), requires_grad=True, name="W")
    x = mg.create_leaf(np.ones((1, 3)), name="x")
    loss = (x @ W).exp().sum()
    return mg.trace_of(loss)


def node_lines(dot):
    return [line for line in dot.splitlines() if "->" not in line and "[" in line
            and not line.strip().startswith(("graph", "node", "edge"))]


def test_every_trace_node_and_edge_is_in_the_dot_with_its_id_and_class():
    trace = small_trace()
    dot = to_dot(trace)
    for node in trace["nodes"]:
        line = next(line for line in node_lines(dot) if line.strip().startswith(node["id"] + " "))
        assert f"id={node['id']}" in line
        expected = "op" if node["type"] == "op" else f"var {node['role']}"
        assert f'class="{expected}"' in line or f"class={expected}" in line
    edge_lines = [line for line in dot.splitlines() if "->" in line]
    assert len(edge_lines) == len(trace["edges"])
    for index, edge in enumerate(trace["edges"]):
        assert any(f"id=e{index}" in line and edge["kind"] in line for line in edge_lines)


def test_saved_edges_are_dashed_and_leave_the_layout_alone_and_can_be_hidden():
    trace = small_trace()
    saved = [line for line in to_dot(trace).splitlines() if "saved" in line and "->" in line]
    assert saved and all("dashed" in line and "constraint=false" in line for line in saved)
    assert not [line for line in to_dot(trace, show_saved=False).splitlines()
                if "saved" in line and "->" in line]


def test_user_names_cannot_become_html_labels_or_escapes():
    evil = mg.create_leaf([1.0], requires_grad=True, name='<img src=x onerror=alert(1)>\\N"')
    dot = to_dot(mg.trace_of((evil * 2).sum()))
    line = next(line for line in node_lines(dot) if "img" in line)
    label = re.search(r'label="((?:[^"\\]|\\.)*)"', line).group(1)
    assert label.startswith("<img src=x onerror=alert(1)>")   # a quoted string, not label=<...>
    assert "\\\\N" in label and '\\"' in label                # backslash and quote escaped


def test_big_graphs_get_a_message_instead_of_a_drawing():
    x = mg.create_leaf(np.ones(2), requires_grad=True)
    h = x
    for _ in range(300):
        h = (h * 1.01).tanh()
    trace = mg.trace_of(h.sum())
    message = too_big_message(trace, 400)
    assert "1,2" in message or "nodes" in message
    assert str(len(trace["nodes"])) in message.replace(",", "")
    assert too_big_message(small_trace(), 400) == ""


def drawn_text(quoted: str) -> list:
    """What Graphviz draws for a quoted DOT label: backslash escapes read (\\n a line break),
    then HTML entities decoded (as Graphviz does in ordinary labels); one string per line."""
    text = re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), quoted)
    return html.unescape(text).split("\n")


def test_an_html_entity_in_a_name_is_drawn_as_written():
    """Rule: a name is drawn as written; `&` is escaped in DOT labels (node, box and frame
    labels), since Graphviz decodes entities such as `&amp;` and `&lt;`."""
    names = ["a &amp; b", "x&lt;y&gt;", "&#38;", "R&D", "\\N &quot;q\""]
    for name in names:
        leaf = mg.create_leaf([1.0], requires_grad=True, name=name)
        dot = to_dot(mg.trace_of((leaf * 2).sum()))
        labels = [re.search(r'label="((?:[^"\\]|\\.)*)"', line).group(1)
                  for line in node_lines(dot) if "var param" in line]
        assert [drawn_text(label)[0] for label in labels] == [name], (name, labels)


def test_an_html_entity_in_a_scope_is_drawn_as_written_in_boxes_and_frames():
    """Box and frame labels, and their ids (which the page reads back from the drawing to
    know which scope was clicked), give back the scope as written: Graphviz reads ids as
    escStrings too, and the page's SVG parser decodes entities."""
    from minigrad.widgets import GraphView
    scope = "enc &amp; dec \\ <b>"
    x = mg.create_leaf(np.ones(2), requires_grad=True, name="x")
    with mg.name_scope(scope):
        y = (x * 2.0).tanh()
    loss = (y * y).sum()
    closed = GraphView(loss, max_nodes=3).dot   # the scope drawn as one box
    opened = GraphView(loss, max_nodes=3, expand=[scope]).dot   # as a frame
    for dot, prefix in ((closed, "s:"), (opened, "c:")):
        labels = re.findall(r'label="((?:[^"\\]|\\.)*)"', dot)
        assert any(drawn_text(label)[0] == scope for label in labels), labels
        ids = [drawn_text(i)[0] for i in re.findall(r'id="((?:[^"\\]|\\.)*)"', dot)]
        assert prefix + scope in ids, ids
