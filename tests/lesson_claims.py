"""What the lessons' sentences say about their own outputs and widgets, checked on the notebook
that tests/test_lessons.py has just executed (no second run).

Each claim quotes the sentence it checks, so the two move together: if the text changes, the
claim names the sentence it can no longer find; if the engine changes, it names the sentence that
went false and what the notebook showed instead.
"""
from __future__ import annotations

import re

# A stepper's step k (the counter's "step k") is trace frame initial_frame + k; frames[i] is the
# index of the last event of frame i (minigrad/trace/events.py close_frame).


def _flat(text: str) -> str:
    return " ".join(text.split())


class Claims:
    """One executed lesson: its text, its outputs, its widgets' state, and the problems found."""

    def __init__(self, stem: str, notebook):
        self.stem, self.notebook = stem, notebook
        self.text = _flat("\n".join(cell.source for cell in notebook.cells))
        widgets = notebook.metadata.get("widgets", {})
        self.models = widgets.get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
        self.problems: list[str] = []

    def says(self, sentence: str) -> bool:
        """The lesson still says this (whitespace-insensitive)."""
        if _flat(sentence) in self.text:
            return True
        self.problems.append(f"{self.stem}: the claim checked no longer appears: {sentence!r}")
        return False

    def check(self, sentence: str, holds: bool, shown) -> None:
        if not holds:
            self.problems.append(f"{self.stem}: the lesson says {sentence!r}, the notebook shows "
                                 f"{shown!r}")

    def cell(self, marker: str):
        for cell in self.notebook.cells:
            if cell.cell_type == "code" and marker in cell.source:
                return cell
        raise LookupError(f"{self.stem}: no code cell contains {marker!r}")

    def output(self, marker: str) -> str:
        parts = []
        for output in self.cell(marker).get("outputs", []):
            if output.output_type == "stream" and output.name == "stdout":
                parts.append(output.text)
            elif "text/plain" in output.get("data", {}):
                parts.append(output.data["text/plain"])
        return "".join(parts)

    def state(self, marker: str) -> dict:
        """The state of the widget the cell with `marker` shows, as the run left it."""
        for output in self.cell(marker).get("outputs", []):
            view = output.get("data", {}).get("application/vnd.jupyter.widget-view+json")
            if view:
                return self.models[view["model_id"]]["state"]
        raise LookupError(f"{self.stem}: the cell with {marker!r} shows no widget")

    def trace(self, marker: str) -> dict:
        return self.state(marker)["trace"]


def step_events(trace: dict, step: int) -> list:
    frames, i = trace["frames"], trace["initial_frame"] + step
    return trace["events"][frames[i - 1] + 1:frames[i] + 1]


def applied(trace: dict, step: int) -> list:
    """The ops whose backward ran in a stepper's step `step` (1 = the seed)."""
    names = {node["id"]: node["name"] for node in trace["nodes"]}
    return [names[e["node"]] for e in step_events(trace, step) if e["type"] == "apply"]


def ready_after(trace: dict, step: int) -> list:
    """The ops in the ready queue after step `step`: made ready, not yet run."""
    last = trace["frames"][trace["initial_frame"] + step]
    names = {node["id"]: node["name"] for node in trace["nodes"]}
    events = trace["events"][:last + 1]
    ran = {e["node"] for e in events if e["type"] == "apply"}
    return sorted(names[e["node"]] for e in events if e["type"] == "ready" and e["node"] not in ran)


def last_step(trace: dict) -> int:
    return len(trace["frames"]) - 1 - trace["initial_frame"]


def numbers(text: str) -> list[float]:
    """The numbers in a printed line, in order (1,234 read as 1234)."""
    found = re.findall(r"-?\d+(?:,\d{3})*(?:\.\d+)?(?:e[-+]?\d+)?", text)
    return [float(x.replace(",", "")) for x in found]


def lesson00(c: Claims) -> None:
    trace = c.trace("stepper = BackwardStepper(loss)")
    if c.says("Step 1 seeds the start of the chain rule"):
        c.check("Step 1 seeds", [e["type"] for e in step_events(trace, 1)] == ["start"],
                step_events(trace, 1))
    if c.says("Steps 2 and 3 run the backward of `pow` and of `sub`"):
        c.check("Steps 2 and 3 run pow and sub", [applied(trace, 2), applied(trace, 3)]
                == [["pow"], ["sub"]], [applied(trace, 2), applied(trace, 3)])
    if c.says("Step 4 runs `add`'s backward"):
        c.check("Step 4 runs add", applied(trace, 4) == ["add"], applied(trace, 4))
    if c.says("`mul` is the only op in the ready queue"):
        c.check("mul is the only op ready", ready_after(trace, 4) == ["mul"], ready_after(trace, 4))
    if c.says("`mul` ran, and `w.grad` arrived: −3.2"):
        c.check("step 5 runs mul", applied(trace, 5) == ["mul"], applied(trace, 5))
    if c.says("One more step finishes backward, and the phase turns to **released**"):
        c.check("one more step finishes", last_step(trace) == 6
                and step_events(trace, 6)[-1]["phase"] == "release", step_events(trace, 6))
    if c.says("so `w.grad` and `c.grad` are still empty"):
        c.check("still empty", c.output("stepper.step(2)").strip() == "w.grad: None   c.grad: None",
                c.output("stepper.step(2)"))
    second = c.trace("stepper2 = BackwardStepper(")
    if c.says("stepper2.step(3)                 # the seed, pow, then add"):
        c.check("the seed, pow, then add", [applied(second, 2), applied(second, 3)]
                == [["pow"], ["add"]], [applied(second, 2), applied(second, 3)])
    if c.says("(tag **=**, value 3)"):
        c.check("w's first gradient is 3", c.output("stepper2.step(3)").strip() == "after add: 3.0",
                c.output("stepper2.step(3)"))
    if c.says("The two agree to within about 1e-7"):
        difference = numbers(c.output("largest difference from finite differences").split(":")[-1])
        c.check("agree to within about 1e-7", difference and difference[-1] < 5e-7, difference)


def lesson03(c: Claims) -> None:
    trace = c.trace('stepper = BackwardStepper(loss, order="topo")')
    if c.says("stepper.step(3)     # the seed, add, then the square's mul"):
        square = [n for n in trace["nodes"] if n["type"] == "op" and n["name"] == "mul"
                  and len(set(n["inputs"])) == 1]
        ran = [e["node"] for e in step_events(trace, 3) if e["type"] == "apply"]
        c.check("the seed, add, then the square's mul", applied(trace, 2) == ["add"]
                and ran == [n["id"] for n in square], [applied(trace, 2), applied(trace, 3)])
        c.check("no w.grad yet", "w.grad after three steps: None" in c.output("stepper.step(3)"),
                c.output("stepper.step(3)"))


def lesson04(c: Claims) -> None:
    trace = c.trace('stepper = BackwardStepper(loss, order="pending")')
    if c.says("stepper.step(4)    # the seed, then the nodes of loss, s and b"):
        labels = {n["id"]: n["label"] for n in trace["nodes"]}
        outputs = {n["id"]: n["output"] for n in trace["nodes"] if n["type"] == "op"}
        made = [[labels[outputs[e["node"]]] for e in step_events(trace, k) if e["type"] == "apply"]
                for k in (2, 3, 4)]
        c.check("the nodes of loss, s and b", made == [["loss"], ["s"], ["b"]], made)
        c.check("h's node still waits for 1", "still waits for 1 gradient" in
                c.output("stepper.step(4)"), c.output("stepper.step(4)"))


def lesson06(c: Claims) -> None:
    table = c.output("best[f\"{name} (lr {lr})\"]")
    rows = {int(line.split()[0]): numbers(line)[1:] for line in table.splitlines()
            if line.strip() and line.split()[0].isdigit()}
    # each row: step, then (loss, a, b) per optimiser: SGD, momentum, Adam
    if c.says("but ends 30 times lower"):
        ratio = rows[60][0] / rows[60][3]
        c.check("momentum ends 30 times lower than SGD", 25 <= ratio <= 36, ratio)
    if c.says("its loss rises at steps 2 and 20"):
        c.check("momentum's loss rises at 2 and 20", rows[2][3] > rows[1][3] and
                rows[20][3] > rows[10][3], [rows[k][3] for k in (1, 2, 10, 20)])
    if c.says("Adam's first step moved both coordinates by its lr, 0.5"):
        c.check("Adam's first step is 0.5 each", rows[1][7:9] == [-3.5, 0.5], rows[1][6:9])


def lesson07(c: Claims) -> None:
    found = re.search(r'"forward: (\d+) of (\d+) recorded"', c.text)
    if found:
        trace = c.trace("BackwardStepper.from_trace(rec.trace)")
        c.check(found.group(0), int(found.group(2)) == trace["initial_frame"] + 1
                and int(found.group(1)) <= int(found.group(2)), trace["initial_frame"] + 1)
    else:
        c.says('"forward: 3 of 9 recorded"')
    if c.says("One value each: the first batch of 32 raised the graph arena's high-water mark"):
        out = c.output("high_water.add(graph.high_water)")
        sets = re.findall(r"\{([^}]*)\}", out)
        c.check("one value each", len(sets) == 2 and all("," not in s for s in sets), out)
    if c.says("27 nodes and about a quarter of a MiB per step, 28 MiB after 120 steps"):
        row = next(line for line in c.output("runs = {").splitlines() if line.startswith(" 120"))
        values = numbers(row)   # 120, then (nodes, KiB) for each of the four runs
        nodes, kib = values[5], values[6]
        c.check("27 nodes per step, 28 MiB", nodes / 120 == 27 and 26 <= kib / 1024 <= 30, row)


    if c.says("each closed box's label says `kind A` and how many closed boxes of that kind there "
              "are (`x7` while step 7 is open)"):
        leak = c.state('leak = GraphView(total')
        labels = re.findall(r"kind [A-Z] \(x\d+\)", leak["dot"])
        c.check("seven closed boxes, all kind A (x7), step 7 open", labels == ["kind A (x7)"] * 7
                and leak["expanded"] == ["step 7"], [labels, leak["expanded"]])


def lesson08(c: Claims) -> None:
    if c.says("Slots 8 to 10 are the same skip on the tape"):
        table = c.output("out_t = f(w_t, x_t)")
        kinds = {int(line.split()[0]): line.split()[1] for line in table.splitlines()
                 if line.strip() and line.split()[0].isdigit()}
        c.check("slots 8 to 10 are consts", [kinds.get(i) for i in (8, 9, 10)] == ["const"] * 3,
                kinds)


def lesson11(c: Claims) -> None:
    if c.says("Every save here is 16 KiB, yet `mul_11` gains nothing and `mul_2` a whole save"):
        peaks = {line.split("peak")[0].split("recompute", 1)[1].strip(): numbers(line)[-1]
                 for line in c.output("for chosen in ([], [\"mul_11\"]").splitlines() if "peak" in line}
        none, late, early = peaks["[]"], peaks["['mul_11']"], peaks["['mul_2']"]
        c.check("mul_11 gains nothing, mul_2 a whole 16 KiB save", late == none
                and none - early == 16384, peaks)
    if c.says("the default policy's 8 recomputes gain no more than the right 3"):
        out = c.output("for budget in (save_all.peak_bytes")
        lowest = next(line for line in c.output("for chosen in ([]").splitlines() if "all 8" in line)
        three = [line for line in out.splitlines() if "recompute 3 of 8" in line]
        c.check("3 recomputes reach the lowest peak", any(
            numbers(line)[0] == numbers(lowest)[-1] for line in three), [out, lowest])


def lesson12(c: Claims) -> None:
    trace = c.trace("stepper = BackwardStepper(loss, max_nodes=20")
    if c.says("Even on one sequence the model's graph has about a hundred nodes"):
        c.check("about a hundred nodes", 80 <= len(trace["nodes"]) <= 125, len(trace["nodes"]))
    if c.says("stepper.step(12)                  # the seed, then eleven nodes: up to `attention`"):
        c.check("step 12 runs attention", applied(trace, 12) == ["attention"], applied(trace, 12))
        c.check("q's projection has not run: no gradient yet", c.output("stepper.step(12)")
                .strip().endswith("False"), c.output("stepper.step(12)"))
    if c.says("(the view opens at step 0, before any rule ran)"):
        view = c.state("view = AotView(small_forward")
        c.check("the AotView opens at step 0", view["frame"] == 0, view["frame"])
    if c.says("Read it like a program: `embedding`, a `reshape` to rows"):
        lines = c.output("for op in forward.operations[:12]").splitlines()
        c.check("embedding, then a reshape", "= embedding(" in lines[2] and "= reshape(" in lines[3],
                lines[2:4])
    if c.says("The saves shrink by almost a third; the peak drops less"):
        found = re.search(r"peak x([\d.]+), saves x([\d.]+)", c.output("recompute: peak x"))
        peak, saves = float(found.group(1)), float(found.group(2))
        c.check("saves down by almost a third, the peak less", 0.62 <= saves <= 0.75
                and peak > saves, found.group(0))


CLAIMS = {"00_welcome": lesson00, "03_backward_topological": lesson03,
          "04_dependency_counting": lesson04, "06_your_own_op": lesson06,
          "07_arenas_and_batches": lesson07, "08_the_tape": lesson08,
          "11_saves_and_memory_plans": lesson11, "12_capstone_transformer": lesson12}


def broken_claims(stem: str, notebook) -> list[str]:
    """The problems with lesson `stem`'s checked sentences, on its executed notebook."""
    claims = Claims(stem, notebook)
    if stem in CLAIMS:
        CLAIMS[stem](claims)
    return claims.problems
