"""Conv(x, w, b) → Transpose(channels last) → LayerNorm ⇒ Conv(x, w) → Transpose → AddLayerNormalization(·, b).

ConvNeXt's block runs a depthwise convolution with a bias, moves the channels last and normalises over them.
The bias is one value per channel, i.e. per column of the LayerNorm's rows, so it can be added where the
LayerNorm reads its row: LN(t + b) = AddLayerNormalization(t, b) with the sum not kept. The convolution then has
no bias, so cuDNN alone computes it (no epilogue launch), and the LayerNorm kernel adds b while it loads the row:
one launch and one read and write of the feature map fewer per block.
Runs after precision conversion (LATE_PASSES), before the pointwise grouping.
"""

from ...ir import Layer, Network
from ...util.log import get_logger
from ..pattern import Graph
from .base import record_rejection

RULE_NAME = "Conv(x, w, b) → Transpose → LayerNorm ⇒ Conv(x, w) → Transpose → AddLayerNormalization(·, b)"


def _only_reader(g: Graph, tensor: str, layer: Layer) -> bool:
    readers = g.consumers(tensor)
    return not g.is_output(tensor) and len(readers) == 1 and readers[0] is layer


def _match(g: Graph, ln: Layer) -> tuple[Layer | None, Layer | None, str | None]:
    """(conv, transpose, None) when the rule applies to LayerNorm `ln`, else (None, None, reason)."""
    if len(ln.outputs) != 1 or not ln.outputs[0]:
        return None, None, "the LayerNorm also returns Mean/InvStdDev"
    tr = g.producer(ln.inputs[0])
    if tr is None or tr.op != "Transpose":
        return None, None, f"its input is produced by {tr.op if tr else 'no layer'}, not by a Transpose"
    conv = g.producer(tr.inputs[0])
    if conv is None or conv.op not in ("Conv", "FusedConv"):
        return None, None, f"the Transpose reads {conv.op if conv else 'no layer'}, not a convolution"
    if len(conv.inputs) < 3 or not conv.inputs[2]:
        return None, None, "the convolution has no bias"
    if conv.op == "FusedConv" and (conv.attrs.get("activation", "none") != "none"
                                   or (len(conv.inputs) > 3 and conv.inputs[3])):
        return None, None, "the convolution's epilogue has an activation or a residual after its bias"
    rank = g.rank(tr.inputs[0])
    perm = tr.attrs.get("perm")
    if rank is None or not perm or len(perm) != rank or perm[-1] != 1:
        return None, None, f"the Transpose (perm {perm}) does not move the channels last"
    if int(ln.attrs.get("axis", -1)) % rank != rank - 1:
        return None, None, f"the LayerNorm normalises from axis {ln.attrs.get('axis')}, not over the channels only"
    if ln.attrs.get("stash_type", 1) != 1:
        return None, None, f"stash_type={ln.attrs.get('stash_type')}"
    if not _only_reader(g, conv.outputs[0], tr) or not _only_reader(g, tr.outputs[0], ln):
        return None, None, "the convolution or the transposed map is read elsewhere (it would lose its bias)"
    dt = g.dtype(conv.outputs[0])
    if dt is None or not dt.is_floating_point or g.dtype(conv.inputs[2]) != dt:
        return None, None, "the convolution output and its bias are not of one floating dtype"
    return conv, tr, None


def move_conv_bias_into_layernorm(net: Network, shape_points: list[dict] | None = None,
                                  max_fold_elements: int = 1 << 24, rejections: list | None = None, **_) -> int:
    """Apply the rule at every LayerNormalization it matches; returns the number of rewrites."""
    g = Graph(net, shape_points or [], max_fold_elements)
    replace: dict[int, Layer] = {}
    log = get_logger()
    for ln in net.layers:
        if ln.op != "LayerNormalization":
            continue
        conv, tr, why = _match(g, ln)
        if why:
            record_rejection(RULE_NAME, ln.name, why, rejections)
            continue
        bias = conv.inputs[2]
        unbiased = conv.copy()
        unbiased.inputs = conv.inputs[:2]
        if conv.op == "FusedConv":                  # no bias and no epilogue left: a plain convolution
            unbiased.op = "Conv"
            unbiased.attrs = {k: v for k, v in conv.attrs.items()
                              if k not in ("activation", "alpha", "beta", "residual_first")}
        fused = Layer(net.unique_name(f"{ln.name}/bias_layernorm"), "AddLayerNormalization",
                      [ln.inputs[0], bias, *ln.inputs[1:]], [ln.outputs[0], ""], dict(ln.attrs),
                      conv.origin + [o for o in ln.origin if o not in conv.origin], precision=ln.precision)
        replace[id(conv)], replace[id(ln)] = unbiased, fused
    if not replace:
        return 0
    net.layers = [replace.get(id(layer), layer) for layer in net.layers]
    log.verbose(f"rule {RULE_NAME}: applied {len(replace) // 2} time(s)")
    return len(replace) // 2
