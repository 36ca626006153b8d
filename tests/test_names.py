"""Names: one check (minigrad.names.check_name) wherever a name enters, so that every name can
travel into a trace (JSON), a drawing (Graphviz DOT) and a page written as UTF-8."""
import json

import numpy as np
import pytest

import minigrad as mg
from minigrad.errors import MinigradError
from minigrad.names import NameTypeError, NameValueError
from minigrad.nn import Linear
from minigrad.widgets import BackwardStepper, GraphView, MemoryView, save_html

ENTRIES = {
    "create_leaf": lambda name: mg.create_leaf([1.0], name=name),
    "create_leaf shared": lambda name: mg.create_leaf(np.ones(2), name=name, copy=False),
    "Linear": lambda name: Linear(2, 3, name=name),
    "Arena": lambda name: mg.Arena(name, 64),
    "Pool": lambda name: mg.Pool(name),
    "record": lambda name: mg.record(name).__enter__(),
    "Tape.var": lambda name: mg.tape.Tape().var(1.0, name=name),
    "TensorTape.const": lambda name: mg.tape.TensorTape().const(np.ones(2), name=name),
}


@pytest.fixture(autouse=True)
def _no_recorder_left():
    yield
    mg.modes.modes.recorder = None   # (the "record" entry enters without leaving on success)


@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize("bad", [3, 2.5, b"W", ["W"], True])
def test_misuse_a_name_must_be_a_string(entry, bad):
    with pytest.raises(NameTypeError, match=r"a name must be a string, got .*Fix: pass a string"):
        ENTRIES[entry](bad)
    assert issubclass(NameTypeError, TypeError) and issubclass(NameTypeError, MinigradError)


@pytest.mark.parametrize("entry", ENTRIES)
def test_misuse_a_name_with_a_lone_surrogate(entry):
    with pytest.raises(NameValueError, match=r"lone surrogate \(U\+D800\) at position 1.*UTF-8"):
        ENTRIES[entry]("W\ud800")
    assert issubclass(NameValueError, ValueError)


@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize("bad, code", [("a\x00b", "U+0000"), ("a\nb", "U+000A"),
                                       ("\tW", "U+0009"), ("W\x7f", "U+007F")])
def test_misuse_a_name_with_a_nul_or_a_control_character(entry, bad, code):
    with pytest.raises(NameValueError, match=rf"control character \({code.replace('+', '[+]')}\)"):
        ENTRIES[entry](bad)


@pytest.mark.parametrize("bad", [3, "a\x00b", "a\ud800"])
def test_misuse_a_scope_name(bad):
    with pytest.raises((NameTypeError, NameValueError), match=r"name_scope\("):
        with mg.name_scope(bad):
            pass


@pytest.mark.parametrize("bad, error", [(7, NameTypeError), ("y\x00", NameValueError),
                                        ("y\udfff", NameValueError)])
def test_misuse_a_name_set_by_attribute_is_refused_when_it_enters_a_trace(bad, error):
    x = mg.create_leaf([1.0, 2.0], requires_grad=True, name="x")
    y = x * 2.0
    y.name = bad   # (an attribute: checked where the name is read, by the trace)
    with pytest.raises(error, match=r"the name of a Variable of shape \(2,\) \(v\.name = \.\.\.\)"):
        mg.trace_of(y.sum())
    with pytest.raises(error):
        GraphView(y.sum())


def test_printable_unicode_names_and_str_subclasses_are_accepted_and_saved(tmp_path):
    names = ["W\u2081", "\u03a9 & <b>", "\U0001f469\u200d\U0001f4bb", "a b\u00a0c", ""]
    leaves = [mg.create_leaf([1.0], requires_grad=True, name=n) for n in names]
    shared = mg.create_leaf([2.0], requires_grad=True, name=np.str_("numpy name"))
    assert type(shared.name) is str and shared.name == "numpy name"
    loss = sum((leaf * 1.0 for leaf in leaves), shared).sum()
    view = GraphView(loss, title="t\u00eftle &amp;")
    page = save_html(view, tmp_path / "names.html").read_text(encoding="utf-8")
    assert "<title>t\u00eftle &amp;amp;</title>" in page   # the title, HTML-escaped
    data = page.split('id="minigrad-data">', 1)[1].split("</script>", 1)[0]
    doc = json.loads(data)["trace"]
    assert {n["name"] for n in doc["nodes"] if n["type"] == "variable"} >= set(names[:-1])


def test_misuse_a_memory_comparison_run_name_with_a_control_character():
    with mg.record() as a:
        mg.create_leaf([1.0])
    with pytest.raises(NameValueError, match=r"MemoryView.compare\(runs\).*U\+0000"):
        MemoryView.compare({"keep\x00": a.trace, 2: a.trace})
    assert MemoryView.compare({"keep": a.trace, 2: a.trace}).options["compare"][1]["name"] == "2"


def test_misuse_save_html_of_a_trace_whose_title_cannot_be_written(tmp_path):
    """A trace loaded from JSON never met the check where titles are given: save_html checks
    its title before writing (it used to fail half way with a UnicodeEncodeError)."""
    x = mg.create_leaf([1.0], requires_grad=True, name="x")
    with mg.record("ok") as rec:
        (x * 2.0).sum().backward()
    trace = json.loads(json.dumps(rec.trace).replace('"ok"', '"\\ud800"'))
    stepper = BackwardStepper.from_trace(trace)   # a replay of that trace
    with pytest.raises(NameValueError, match=r"save_html: the trace's title.*lone surrogate"):
        save_html(stepper, tmp_path / "t.html")
    assert not (tmp_path / "t.html").exists()
