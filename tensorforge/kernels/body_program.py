"""Control-flow bodies compiled once into slot programs, with trip-invariant work taken out of the trips.

`BodyProgram(net, device, kernels, invariant, counter)` numbers every value of the body (slots), puts the
constants on the device once and splits the layers in two phases. The *prelude* runs once per call of the
control-flow layer: every layer whose inputs are all trip-invariant (constants, the `invariant` inputs — a Loop's
or Scan's captured tensors — and earlier invariant results), and, for a Loop (`counter` = the trip-index input),
the *row-lifted* layers: a value X[i] (Gather of an invariant X at the trip index along axis 0) and what row-wise
layers make of it (Unsqueeze, MatMul/MatMulEpilogue by an invariant 2-D weight, elementwise ops with invariant
operands) are computed for all rows at once, P = f(X), and each trip reads its row P[i] (a `select`, no copy).
Loop body z = X[i]·W + h·U: one (F, K)×(K, N) GEMM per call instead of one (1, K)×(K, N) GEMM plus a Gather and
an Unsqueeze per trip. A fused MatMulEpilogue with a trip-varying residual keeps only `row + residual` in the trip
(one addmm when the residual is the trip's own MatMul by an invariant weight); an invariant addend of that sum is
folded into the stack and a following Tanh/Relu/Sigmoid applied in place (`_fold`): tanh(x_i·W + h·U + b) is one
addmm and one in-place tanh per trip.
The *trip* phase runs the remaining kernels on a copy of the prelude's slots; Identity layers become slot aliases
(no call); slots are cleared after their last reader. Lifting is decided at build from the graph; the run-time
shapes it needs (a 2-D weight, operands of rank ≤ the row's) are checked in the prelude, which returns None when
they do not hold — the caller then runs the plain program (`hoist=False`), whose result is the reference's.
Numerics: the same products and sums, row by row; only the GEMM's blocking may differ (fp32 rounding).
"""

import torch

from ..ir import Network, get_spec
from ..ir.interpret import as_outputs
from ..ir.ops.shape import host_ints, norm_axis

# ops whose result is not a function of their inputs: never taken out of the trip
_NOT_INVARIANT = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Bernoulli",
                  "Multinomial", "Dropout"}
# elementwise ops whose row-lifted form is the op on the whole stack (operands of rank ≤ the row's broadcast alike)
_UNARY = {"Relu", "Tanh", "Sigmoid", "Neg", "Abs", "Exp", "Log", "Sqrt", "Erf", "Cast", "Identity", "HardSwish",
          "HardSigmoid", "LeakyRelu", "Elu", "Softplus", "Gelu", "Clip"}
_BINARY = {"Add", "Sub", "Mul", "Div", "Pow"}
ROW_SLACK = 2             # lift only when the stack has at most this many rows per trip the Loop will run


class NoLift(Exception):
    """A lifted step's run-time operands do not allow the lift (this call runs the plain program)."""


def _lifted(layer, lifted: set, invariant: set, counter):
    """The prelude function of a row-lifted layer, `(fn, residual_input)`, or None when it is not liftable.
    fn(ins, trips) → the lifted output stack; ins are stacks for lifted inputs, values for invariant ones."""
    op, a, ins = layer.op, layer.attrs, list(layer.inputs)
    kind = [("L" if i in lifted else "I" if (not i or i in invariant) else "V") for i in ins]
    ref = get_spec(op).reference
    if op == "Gather" and len(ins) == 2 and ins[1] == counter and kind[0] == "I" and a.get("axis", 0) == 0:
        def gather(v, trips):
            x = v[0]
            if x.dim() < 1 or trips is None or x.shape[0] > ROW_SLACK * max(trips, 1):
                raise NoLift
            return x
        return gather, None
    residual = ins[3] if op == "MatMulEpilogue" and len(ins) > 3 and kind[3] == "V" else None
    if "L" not in kind or len(layer.outputs) != 1 or any(k == "V" and i != residual for k, i in zip(kind, ins)):
        return None
    if op == "Unsqueeze" and kind == ["L", "I"]:
        def unsqueeze(v, trips):
            axes = host_ints(v[1], "Unsqueeze axes")
            rank = v[0].dim() - 1 + len(axes)
            out = v[0]
            for ax in sorted(norm_axis(x, rank) for x in axes):
                out = out.unsqueeze(ax + 1)
            return out
        return unsqueeze, None
    if op in ("MatMul", "MatMulEpilogue") and kind[0] == "L" and kind[1] == "I" and "L" not in kind[2:]:
        if residual is not None and a.get("activation", "none") != "none":
            return None

        def matmul(v, trips):
            p, w = v[0], v[1]
            row_rank = p.dim() - 1
            if w.dim() != 2 or row_rank < 1 or any(t is not None and t.dim() > row_rank for t in v[2:]):
                raise NoLift
            if op == "MatMul":
                return torch.matmul(p, w)
            extra = [v[2] if len(v) > 2 else None, None if residual is not None or len(v) < 4 else v[3]]
            return ref(p, w, *extra, **a)
        return matmul, residual
    if op in _UNARY and kind[0] == "L" and all(k == "I" for k in kind[1:]):
        def unary(v, trips):
            if any(t is not None and t.dim() > 0 for t in v[1:]):
                raise NoLift
            return as_outputs(ref(*v, **a), 1)[0]
        return unary, None
    if op in _BINARY and len(ins) == 2:
        def binary(v, trips):
            ranks = [t.dim() - 1 if k == "L" else t.dim() for t, k in zip(v, kind)]
            if any(k == "I" and r > ranks[1 - j] for j, (k, r) in enumerate(zip(kind, ranks))) or \
                    (kind == ["L", "L"] and ranks[0] != ranks[1]):
                raise NoLift
            return as_outputs(ref(*v, **a), 1)[0]
        return binary, None
    return None


def _row(ins):
    """Trip step: row ins[1] (the trip index, a Python int) of the stack ins[0]."""
    return [ins[0].select(0, ins[1])]


def _row_copy(ins):
    return [ins[0].select(0, ins[1]).clone()]     # a body output never aliases the prelude's stack


def _row_plus(ins):
    """Trip step of a lifted MatMulEpilogue with a trip-varying residual: (act-free product + bias)[i] + residual."""
    return [ins[0].select(0, ins[1]) + ins[2]]


def _row_addmm(ins):
    """_row_plus whose residual is a MatMul a·w of this trip (read by nothing else): one addmm, row + a·w."""
    row, a, w = ins[0].select(0, ins[1]), ins[2], ins[3]
    if a.dim() == 2 and w.dim() == 2 and row.dim() <= 2 and a.dtype == w.dtype == row.dtype:
        return [torch.addmm(row, a, w)]
    return [row + torch.matmul(a, w)]


def _add_stack(v, trips):
    """Prelude step: an invariant addend folded into a row stack, P + c (c of rank ≤ the row's)."""
    p, c = v
    if c.dim() > p.dim() - 1:
        raise NoLift
    return p + c


_IN_PLACE = {"Tanh": torch.Tensor.tanh_, "Relu": torch.Tensor.relu_, "Sigmoid": torch.Tensor.sigmoid_}


def _then(step, act):
    """A row step followed by an attribute-free activation, applied in place on its fresh result."""
    def run(ins):
        return [act(step(ins)[0])]
    return run


class BodyProgram:
    """`net` compiled once. `prelude(invariant values, trips)` → the base slots (None: a lift refused);
    `trip(base, i, varying values)` → the body's outputs; `program(inputs)` does both for one run (If).

    Slot 0 is the sink for absent outputs, slot 1 always None (absent optional inputs), slot 2 the trip index as
    a Python int; then the constants (on `device`, moved once), the inputs, one slot per value a layer makes."""

    def __init__(self, net: Network, device, kernels: list, invariant=(), counter=None, hoist=True):
        table: dict[str, int] = {}
        template: list = [None, None, None]

        def slot(name, value=None):
            if name not in table:
                table[name] = len(template)
                template.append(value)
            return table[name]
        for name, t in net.constants.items():
            slot(name, t.to(device))
        invariant = [n for n in invariant if n in net.inputs]
        self.inv_slots = tuple(slot(n) for n in invariant)
        self.var_slots = tuple(slot(n) for n in net.inputs if n not in invariant)
        self.in_slots = tuple(table[n] for n in net.inputs)
        inv, lifted = set(net.constants) | set(invariant), set()
        prelude, steps, rows, made_by, row_made = [], [], {}, {}, {}
        outputs = set(net.outputs)
        readers: dict[str, int] = {}
        for layer in net.layers:
            for i in layer.inputs:
                readers[i] = readers.get(i, 0) + 1

        def read(name):
            """The slot a trip step reads for `name`: a lifted stack gets its row taken once per trip."""
            if not name:
                return 1
            if name not in table:
                raise ValueError(f"body layer reads {name!r}, which nothing before it produces")
            if name in lifted:
                if name not in rows:
                    rows[name] = len(template)
                    template.append(None)
                    steps.append((_row_copy if name in outputs else _row, (table[name], 2), (rows[name],)))
                return rows[name]
            return table[name]
        for layer, kernel in zip(net.layers, kernels):
            missing = [i for i in layer.inputs if i and i not in table]
            if missing:
                raise ValueError(f"body layer {layer.name!r} reads {missing[0]!r}, which nothing before it produces")
            outs = [o for o in layer.outputs if o]
            if hoist and layer.op not in _NOT_INVARIANT and all(not i or i in inv for i in layer.inputs):
                prelude.append((kernel, tuple(table[i] if i else 1 for i in layer.inputs),
                                tuple(slot(o) if o else 0 for o in layer.outputs)))
                inv.update(outs)
                continue
            lift = _lifted(layer, lifted, inv, counter) if hoist and counter else None
            if lift is not None:
                fn, residual = lift
                ins = tuple(table[i] if i else 1 for i in layer.inputs if i != residual)
                out = layer.outputs[0]
                if residual is None:
                    prelude.append((fn, ins, (slot(out),), "lift"))
                    lifted.add(out)
                else:
                    stack = f"{out}@stack"
                    prelude.append((fn, ins, (slot(stack),), "lift"))
                    mm = made_by.get(residual)
                    if mm is not None and mm[0] == len(steps) - 1 and readers[residual] == 1 and residual not in outputs:
                        steps.pop()                     # its MatMul joins the row: row + a·w in one addmm
                        steps.append((_row_addmm, (table[stack], 2, *mm[1]), (slot(out),)))
                    else:
                        steps.append((_row_plus, (table[stack], 2, read(residual)), (slot(out),)))
                    row_made[out] = len(steps) - 1
                continue
            if hoist and len(outs) == 1 and self._fold(layer, outs[0], table, slot, prelude, steps, row_made, inv,
                                                       readers, outputs):
                continue
            if layer.op == "Identity" and len(layer.inputs) == 1 and len(outs) == 1 and layer.inputs[0]:
                table[outs[0]] = read(layer.inputs[0])      # an alias: no call
                continue
            ins = tuple(read(i) for i in layer.inputs)
            if layer.op == "MatMul" and len(outs) == 1 and layer.inputs[1] in inv:
                made_by[outs[0]] = (len(steps), ins)
            steps.append((kernel, ins, tuple(slot(o) if o else 0 for o in layer.outputs)))
        missing = [n for n in net.outputs if n not in table]
        if missing:
            raise ValueError(f"body output {missing[0]!r} is produced by no layer and is no input or constant")
        self.out_slots = tuple(read(n) if n in lifted else table[n] for n in net.outputs)
        keep = set(self.out_slots) | {table[n] for n in inv if n in table} | {0, 1, 2}
        last: dict[int, int] = {}
        for index, (_, ins, _) in enumerate(steps):
            for s in ins:
                last[s] = index
        self.steps = tuple((k, ins, outs, tuple(s for s in dict.fromkeys(ins) if last.get(s) == index and s not in keep))
                           for index, (k, ins, outs) in enumerate(steps))
        self.prelude_steps = tuple(prelude)
        self.lifted = sorted(lifted)
        self.hoisted = [s for s in prelude if len(s) == 3]
        self.template = template

    @staticmethod
    def _fold(layer, out, table, slot, prelude, steps, row_made, inv, readers, outputs) -> bool:
        """Fold `layer` into the row step (P[i] + r) that makes its only trip-varying input, when that value has no
        other reader: Add of an invariant c → the stack becomes P + c in the prelude (fp32 sums reassociated:
        (P[i] + c) + r); Tanh/Relu/Sigmoid → applied in place by the row step. True when folded (`out` then names
        the row step's result)."""
        ins = [i for i in layer.inputs if i]
        v = next((i for i in ins if i in row_made), None)
        if v is None or readers.get(v) != 1 or v in outputs or len(layer.inputs) != len(ins):
            return False
        j = row_made.pop(v)
        step, step_ins, step_outs = steps[j]
        if layer.op == "Add" and len(ins) == 2 and ins[0] != ins[1] and all(i == v or i in inv for i in ins):
            c = ins[1] if ins[0] == v else ins[0]
            stack = f"{out}@stack"
            prelude.append((_add_stack, (step_ins[0], table[c]), (slot(stack),), "lift"))
            steps[j] = (step, (table[stack], *step_ins[1:]), step_outs)
            row_made[out] = j
        elif layer.op in _IN_PLACE and len(ins) == 1:
            steps[j] = (_then(step, _IN_PLACE[layer.op]), step_ins, step_outs)
        else:
            row_made[v] = j
            return False
        table[out] = step_outs[0]
        return True

    def prelude(self, invariant_values, trips=None):
        slots = self.template[:]
        for s, v in zip(self.inv_slots, invariant_values):
            slots[s] = v
        try:
            for step in self.prelude_steps:
                fn, ins, outs = step[:3]
                vals = [slots[i] for i in ins]
                res = [fn(vals, trips)] if len(step) == 4 else fn(vals)
                for s, t in zip(outs, res):
                    slots[s] = t
        except NoLift:
            return None
        return slots

    def trip(self, base, index: int, varying_values) -> list:
        slots = base[:]
        slots[2] = index
        for s, v in zip(self.var_slots, varying_values):
            slots[s] = v
        for kernel, ins, outs, frees in self.steps:
            for s, t in zip(outs, kernel([slots[i] for i in ins])):
                slots[s] = t
            for s in frees:
                slots[s] = None
        return [slots[s] for s in self.out_slots]

    def __call__(self, inputs) -> list:
        """One run with every input given in net.inputs order (no lifting: `counter` is None here)."""
        by_slot = dict(zip(self.in_slots, inputs))
        base = self.prelude([by_slot[s] for s in self.inv_slots])
        return self.trip(base, 0, [by_slot[s] for s in self.var_slots])
