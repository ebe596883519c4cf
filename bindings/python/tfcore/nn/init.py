"""tfcore.nn.init: torch.nn.init's functions, drawing from tfcore's Philox stream
(tfcore.manual_seed). Each fills the tensor in place without recording it on the
graph and returns it; the formulas (fans, gains, bounds) are torch's."""
import math
import numbers
import warnings

from .. import autograd as _ag
from ..tensor import Tensor


def _check(tensor, fn):
    if not isinstance(tensor, Tensor):
        raise TypeError("tfcore.nn.init.%s: tensor must be a tfcore.Tensor, got %s" % (fn, type(tensor).__name__))
    if not tensor.is_floating_point():
        raise TypeError("tfcore.nn.init.%s: tensor must be floating point, got %r" % (fn, tensor.dtype))


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for a nonlinearity (torch's table): linear, conv*, sigmoid 1; tanh 5/3;
    relu √2; leaky_relu √(2 / (1 + slope²)) (slope param, default 0.01); selu 3/4."""
    linear_fns = ["linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                  "conv_transpose3d"]
    if nonlinearity in linear_fns or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, numbers.Number):
            slope = param
        else:
            raise ValueError("negative_slope {} not a valid number".format(param))
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError("Unsupported nonlinearity {}".format(nonlinearity))


def _calculate_fan_in_and_fan_out(tensor):
    """fan_in = shape[1]·receptive, fan_out = shape[0]·receptive, receptive = prod(shape[2:])
    (a Linear weight is [out, in])."""
    shape = tensor.shape
    if len(shape) < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    receptive = 1
    for d in shape[2:]:
        receptive *= d
    return shape[1] * receptive, shape[0] * receptive


def _calculate_correct_fan(tensor, mode):
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError("Mode {} not supported, please use one of fan_in, fan_out".format(mode))
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def uniform_(tensor, a=0.0, b=1.0):
    _check(tensor, "uniform_")
    with _ag.no_grad():
        return tensor.uniform_(float(a), float(b))


def normal_(tensor, mean=0.0, std=1.0):
    _check(tensor, "normal_")
    with _ag.no_grad():
        return tensor.normal_(float(mean), float(std))


def constant_(tensor, val):
    _check(tensor, "constant_")
    with _ag.no_grad():
        return tensor.fill_(float(val))


def ones_(tensor):
    return constant_(tensor, 1.0)


def zeros_(tensor):
    return constant_(tensor, 0.0)


def xavier_uniform_(tensor, gain=1.0):
    """U(−a, a), a = gain·√(6 / (fan_in + fan_out))."""
    _check(tensor, "xavier_uniform_")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    a = math.sqrt(3.0) * std
    return uniform_(tensor, -a, a)


def xavier_normal_(tensor, gain=1.0):
    """N(0, std²), std = gain·√(2 / (fan_in + fan_out))."""
    _check(tensor, "xavier_normal_")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return normal_(tensor, 0.0, std)


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu"):
    """U(−bound, bound), bound = gain·√(3 / fan), gain = calculate_gain(nonlinearity, a)."""
    _check(tensor, "kaiming_uniform_")
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op")
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    gain = calculate_gain(nonlinearity, a)
    bound = math.sqrt(3.0) * gain / math.sqrt(fan)
    return uniform_(tensor, -bound, bound)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu"):
    """N(0, std²), std = gain / √fan."""
    _check(tensor, "kaiming_normal_")
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op")
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    gain = calculate_gain(nonlinearity, a)
    return normal_(tensor, 0.0, gain / math.sqrt(fan))
