"""Graphs whose generated GPU code is checked on a GPU machine (docs/gpu.md).

Each case is a `terra.graph` compiled here with `terra-gpu-pipeline` into a
shared library (scripts/gpu-bundle.sh) and run there with
`terra-run-object --device cuda` (scripts/gpu-check.sh); check_graphs.py
compares every fetch with the same computation in torch on the GPU.

A case: its MLIR, its feeds (id -> shape, dtype), its control decisions
(terra-run-object's --case/--loop), the reference (a function of the feeds,
as torch CUDA tensors, returning fetch id -> tensor) and a tolerance.
"""

POINTWISE = """
module {
  terra.graph @step {
    %x = terra.feed 1 : tensor<?x?xf32>
    %y = terra.feed 2 : tensor<?xf32>
    %m = terra.op "aten.mul.Tensor"(%x, %y) : (tensor<?x?xf32>, tensor<?xf32>) -> tensor<?x?xf32>
    %a = terra.op "aten.add.Tensor"(%m, %x) args {alpha = 1 : i64} : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
    %t = terra.op "aten.tanh"(%a) : (tensor<?x?xf32>) -> tensor<?x?xf32>
    %s = terra.op "aten.sigmoid"(%t) : (tensor<?x?xf32>) -> tensor<?x?xf32>
    terra.fetch 0 %s : tensor<?x?xf32>
  }
}
"""

# The graph of test/lit/GPU/ptxas.mlir: softmax, a reduction over the outer
# dim, a full reduction, and a linear layer whose matmul is a cuBLAS call.
SOFTMAX_REDUCE_LINEAR = """
module {
  terra.graph @step {
    %x = terra.feed 1 : tensor<?x64xf32>
    %m = terra.op "aten._softmax"(%x) args {dim = -1 : i64, half_to_float = false} : (tensor<?x64xf32>) -> tensor<?x64xf32>
    %s = terra.op "aten.sum.dim_IntList"(%x) args {dim = [0]} : (tensor<?x64xf32>) -> tensor<64xf32>
    %t = terra.op "aten.amax"(%x) args {dim = []} : (tensor<?x64xf32>) -> tensor<f32>
    %w = terra.feed 2 : tensor<64x32xf32>
    %b = terra.feed 3 : tensor<32xf32>
    %y = terra.op "aten.addmm"(%b, %m, %w) : (tensor<32xf32>, tensor<?x64xf32>, tensor<64x32xf32>) -> tensor<?x32xf32>
    %r = terra.op "aten.relu"(%y) : (tensor<?x32xf32>) -> tensor<?x32xf32>
    terra.fetch 0 %r : tensor<?x32xf32>
    terra.fetch 1 %s : tensor<64xf32>
    terra.fetch 2 %t : tensor<f32>
  }
}
"""

LAYERNORM_BMM = """
module {
  terra.graph @step {
    %x = terra.feed 1 : tensor<?x64xf32>
    %w = terra.feed 2 : tensor<64xf32>
    %b = terra.feed 3 : tensor<64xf32>
    %r:3 = terra.op "aten.native_layer_norm"(%x, %w, %b) args {normalized_shape = [64], eps = 1.0e-5 : f64} : (tensor<?x64xf32>, tensor<64xf32>, tensor<64xf32>) -> (tensor<?x64xf32>, tensor<?x1xf32>, tensor<?x1xf32>)
    terra.fetch 0 %r#0 : tensor<?x64xf32>
    %a = terra.feed 4 : tensor<4x?x32xf32>
    %c = terra.feed 5 : tensor<4x32x16xf32>
    %m = terra.op "aten.bmm"(%a, %c) : (tensor<4x?x32xf32>, tensor<4x32x16xf32>) -> tensor<4x?x16xf32>
    terra.fetch 1 %m : tensor<4x?x16xf32>
  }
}
"""

# One SGD step of a linear regression: forward, the loss, its gradient
# through the transposed input (a cuBLAS call on a copied operand), and the
# update.
SGD_STEP = """
module {
  terra.graph @step {
    %x = terra.feed 1 : tensor<?x16xf32>
    %w = terra.feed 2 : tensor<16x8xf32>
    %t = terra.feed 3 : tensor<?x8xf32>
    %y = terra.op "aten.mm"(%x, %w) : (tensor<?x16xf32>, tensor<16x8xf32>) -> tensor<?x8xf32>
    %l = terra.op "aten.mse_loss"(%y, %t) args {reduction = 1 : i64} : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<f32>
    terra.fetch 0 %l : tensor<f32>
    %one = terra.op "aten.ones_like"(%l) args {dtype, layout, device, pin_memory, memory_format} : (tensor<f32>) -> tensor<f32>
    %gy = terra.op "aten.mse_loss_backward"(%one, %y, %t) args {reduction = 1 : i64} : (tensor<f32>, tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
    %xt = terra.op "aten.t"(%x) : (tensor<?x16xf32>) -> tensor<16x?xf32>
    %gw = terra.op "aten.mm"(%xt, %gy) : (tensor<16x?xf32>, tensor<?x8xf32>) -> tensor<16x8xf32>
    %n = terra.op "aten.sub.Tensor"(%w, %gw) args {alpha = 1.0e-01 : f64} : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
    terra.fetch 1 %n : tensor<16x8xf32>
  }
}
"""

# A merged graph's control flow: a switch on a case select and a loop on a
# host condition, decided on the command line.
SWITCH_LOOP = """
module {
  terra.graph @step {
    %x = terra.feed 1 : tensor<?x4xf32>
    %w = terra.feed 2 : tensor<4xf32>
    %c = terra.case_select 5 cases 2
    %z = scf.index_switch %c -> tensor<?x4xf32>
    case 0 {
      %m = terra.op "aten.mul.Tensor"(%x, %w) : (tensor<?x4xf32>, tensor<4xf32>) -> tensor<?x4xf32>
      scf.yield %m : tensor<?x4xf32>
    }
    default {
      %e = terra.op "aten.exp"(%x) : (tensor<?x4xf32>) -> tensor<?x4xf32>
      scf.yield %e : tensor<?x4xf32>
    }
    %o = scf.while (%a = %z) : (tensor<?x4xf32>) -> tensor<?x4xf32> {
      %k = terra.loop_cond 7
      scf.condition(%k) %a : tensor<?x4xf32>
    } do {
    ^bb0(%a: tensor<?x4xf32>):
      %n = terra.op "aten.mul.Tensor"(%a, %a) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
      scf.yield %n : tensor<?x4xf32>
    }
    terra.fetch 0 %o : tensor<?x4xf32>
  }
}
"""

FULL_SUM_F64 = """
module {
  terra.graph @step {
    %x = terra.feed 1 : tensor<?xf64>
    %s = terra.op "aten.sum"(%x) args {dtype} : (tensor<?xf64>) -> tensor<f64>
    %e = terra.op "aten.exp"(%x) : (tensor<?xf64>) -> tensor<?xf64>
    terra.fetch 0 %s : tensor<f64>
    terra.fetch 1 %e : tensor<?xf64>
  }
}
"""

# Reductions with few outputs over many elements, which terra-linalg-to-gpu
# splits across threads: row maxima and sums of a static 8x50000 (max's
# neutral element is -inf), a full sum of it (split twice), and a full sum
# of a size known only at run time (split when it is large).
SPLIT_REDUCTIONS = """
module {
  terra.graph @step {
    %x = terra.feed 1 : tensor<8x50000xf32>
    %m = terra.op "aten.amax"(%x) args {dim = [1]} : (tensor<8x50000xf32>) -> tensor<8xf32>
    %s = terra.op "aten.sum.dim_IntList"(%x) args {dim = [1]} : (tensor<8x50000xf32>) -> tensor<8xf32>
    %t = terra.op "aten.sum"(%x) args {dtype} : (tensor<8x50000xf32>) -> tensor<f32>
    %y = terra.feed 2 : tensor<?xf32>
    %e = terra.op "aten.exp"(%y) : (tensor<?xf32>) -> tensor<?xf32>
    %u = terra.op "aten.sum"(%e) args {dtype} : (tensor<?xf32>) -> tensor<f32>
    terra.fetch 0 %m : tensor<8xf32>
    terra.fetch 1 %s : tensor<8xf32>
    terra.fetch 2 %t : tensor<f32>
    terra.fetch 3 %u : tensor<f32>
  }
}
"""

# A GEMM large enough to time against cuBLAS called directly (torch.mm):
# the graph's matmul is a cuBLAS call too (scripts/gpu-check.sh, part 3).
GEMM = """
module {
  terra.graph @step {
    %a = terra.feed 1 : tensor<?x2048xf32>
    %b = terra.feed 2 : tensor<2048x2048xf32>
    %c = terra.op "aten.mm"(%a, %b) : (tensor<?x2048xf32>, tensor<2048x2048xf32>) -> tensor<?x2048xf32>
    terra.fetch 0 %c : tensor<?x2048xf32>
  }
}
"""

# Transposes of intermediates feeding GEMMs (a linear layer's backward,
# attention scores q @ k^T): cuBLAS reads them as transposed views
# (-terra-library-calls{backend=cuda}, CUBLAS_OP_T), no transpose kernel.
TRANSPOSED_GEMMS = """
module {
  terra.graph @step {
    %x = terra.feed 1 : tensor<?x48xf32>
    %w = terra.feed 2 : tensor<48x24xf32>
    %dy = terra.feed 3 : tensor<?x24xf32>
    %h0 = terra.op "aten.mm"(%x, %w) : (tensor<?x48xf32>, tensor<48x24xf32>) -> tensor<?x24xf32>
    %h = terra.op "aten.relu"(%h0) : (tensor<?x24xf32>) -> tensor<?x24xf32>
    %ht = terra.op "aten.t"(%h) : (tensor<?x24xf32>) -> tensor<24x?xf32>
    %gw = terra.op "aten.mm"(%ht, %dy) : (tensor<24x?xf32>, tensor<?x24xf32>) -> tensor<24x24xf32>
    %wt = terra.op "aten.t"(%w) : (tensor<48x24xf32>) -> tensor<24x48xf32>
    %gx = terra.op "aten.mm"(%h, %wt) : (tensor<?x24xf32>, tensor<24x48xf32>) -> tensor<?x48xf32>
    terra.fetch 0 %gw : tensor<24x24xf32>
    terra.fetch 1 %gx : tensor<?x48xf32>
    %q = terra.feed 4 : tensor<4x?x16xf32>
    %k = terra.feed 5 : tensor<4x?x16xf32>
    %qs = terra.op "aten.relu"(%q) : (tensor<4x?x16xf32>) -> tensor<4x?x16xf32>
    %ks = terra.op "aten.relu"(%k) : (tensor<4x?x16xf32>) -> tensor<4x?x16xf32>
    %kt = terra.op "aten.transpose.int"(%ks) args {dim0 = -2 : i64, dim1 = -1 : i64} : (tensor<4x?x16xf32>) -> tensor<4x16x?xf32>
    %sc = terra.op "aten.bmm"(%qs, %kt) : (tensor<4x?x16xf32>, tensor<4x16x?xf32>) -> tensor<4x?x?xf32>
    terra.fetch 2 %sc : tensor<4x?x?xf32>
  }
}
"""


# Convolutions through cuDNN (-terra-library-convolutions{backend=cuda}):
# a grouped, strided, padded convolution with a bias, its backward (input,
# weight and bias gradients) and a transposed convolution (DCGAN's
# generator layer, a gradient-of-input call). CONVOLUTIONS_F64 is exact up
# to summation order; the f32 one runs with cuDNN's default math, TF32 on
# an H100 as torch's default (torch.backends.cudnn.allow_tf32).
CONVOLUTIONS = """
module {
  terra.graph @step {
    %x = terra.feed 1 : tensor<2x4x9x7xT>
    %w = terra.feed 2 : tensor<6x2x3x3xT>
    %b = terra.feed 3 : tensor<6xT>
    %y = terra.op "aten.convolution"(%x, %w, %b) args {stride = [2, 2], padding = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 2 : i64} : (tensor<2x4x9x7xT>, tensor<6x2x3x3xT>, tensor<6xT>) -> tensor<2x6x5x4xT>
    terra.fetch 0 %y : tensor<2x6x5x4xT>
    %dy = terra.feed 4 : tensor<2x6x5x4xT>
    %g:3 = terra.op "aten.convolution_backward"(%dy, %x, %w) args {stride = [2, 2], padding = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 2 : i64, output_mask = [true, true, true], bias_sizes = [6]} : (tensor<2x6x5x4xT>, tensor<2x4x9x7xT>, tensor<6x2x3x3xT>) -> (tensor<2x4x9x7xT>, tensor<6x2x3x3xT>, tensor<6xT>)
    terra.fetch 1 %g#0 : tensor<2x4x9x7xT>
    terra.fetch 2 %g#1 : tensor<6x2x3x3xT>
    terra.fetch 3 %g#2 : tensor<6xT>
    %tx = terra.feed 5 : tensor<2x8x4x4xT>
    %tw = terra.feed 6 : tensor<8x4x4x4xT>
    %ty = terra.op "aten.convolution"(%tx, %tw) args {bias = unit, stride = [2, 2], padding = [1, 1], dilation = [1, 1], transposed = true, output_padding = [0, 0], groups = 1 : i64} : (tensor<2x8x4x4xT>, tensor<8x4x4x4xT>) -> tensor<2x4x8x8xT>
    terra.fetch 4 %ty : tensor<2x4x8x8xT>
  }
}
"""
# Session 22's lowerings: var/std with their means, cumsum (a sequential
# scan: an scf.for of kernels), a diagonal read and one written, the
# as_strided run along a diagonal that autograd makes of a gradient,
# index_add (an scf.for of slice adds), unfold and its backward.
SCANS_DIAGONALS = """
module {
  terra.graph @step {
    %x = terra.feed 1 : tensor<?x24xf32>
    %v:2 = terra.op "aten.var_mean.correction"(%x) args {dim = [1], correction = 1 : i64, keepdim = true} : (tensor<?x24xf32>) -> (tensor<?x1xf32>, tensor<?x1xf32>)
    %s = terra.op "aten.std.correction"(%x) args {dim = [0], correction = 0 : i64, keepdim = false} : (tensor<?x24xf32>) -> tensor<24xf32>
    %c = terra.op "aten.cumsum"(%x) args {dim = 1 : i64} : (tensor<?x24xf32>) -> tensor<?x24xf32>
    %m = terra.feed 2 : tensor<16x16xf32>
    %d = terra.op "aten.diagonal"(%m) args {offset = -2 : i64, dim1 = 0 : i64, dim2 = 1 : i64} : (tensor<16x16xf32>) -> tensor<14xf32>
    %e = terra.op "aten.diagonal_scatter"(%m, %d) args {offset = 2 : i64, dim1 = 1 : i64, dim2 = 0 : i64} : (tensor<16x16xf32>, tensor<14xf32>) -> tensor<16x16xf32>
    %a = terra.op "aten.as_strided"(%e) args {size = [16], stride = [17], storage_offset = 0 : i64} : (tensor<16x16xf32>) -> tensor<16xf32>
    terra.fetch 0 %v#0 : tensor<?x1xf32>
    terra.fetch 1 %v#1 : tensor<?x1xf32>
    terra.fetch 2 %s : tensor<24xf32>
    terra.fetch 3 %c : tensor<?x24xf32>
    terra.fetch 4 %e : tensor<16x16xf32>
    terra.fetch 5 %a : tensor<16xf32>
    %i = terra.op "aten.arange.start_step"() args {start = 15 : i64, end = 0 : i64, step = -3 : i64} : () -> tensor<5xi64>
    %src = terra.feed 3 : tensor<16x5xf32>
    %g = terra.op "aten.index_add"(%m, %i, %src) args {dim = 1 : i64, alpha = 1 : i64} : (tensor<16x16xf32>, tensor<5xi64>, tensor<16x5xf32>) -> tensor<16x16xf32>
    terra.fetch 8 %g : tensor<16x16xf32>
    %u = terra.op "aten.unfold"(%x) args {dimension = 1 : i64, size = 5 : i64, step = 2 : i64} : (tensor<?x24xf32>) -> tensor<?x10x5xf32>
    %w = terra.feed 4 : tensor<3x10x5xf32>
    %b = terra.op "aten.unfold_backward"(%w) args {input_sizes = [3, 24], dim = 1 : i64, size = 5 : i64, step = 2 : i64} : (tensor<3x10x5xf32>) -> tensor<3x24xf32>
    terra.fetch 6 %u : tensor<?x10x5xf32>
    terra.fetch 7 %b : tensor<3x24xf32>
  }
}
"""
CONVOLUTIONS_F32 = CONVOLUTIONS.replace("xT>", "xf32>")
CONVOLUTIONS_F64 = CONVOLUTIONS.replace("xT>", "xf64>")


# What the host code of a GPU graph must not read from device memory
# (-terra-gpu-host-kernels): fed 0-d scalars (SGD's momentum and learning
# rate), the divisor table of avg_pool2d without padding and the window
# masks of adaptive pooling (globals of the kernel module, not the host's).
HOST_READS = """
module {
  terra.graph @step {
    %p = terra.feed 1 : tensor<16x6xf32>
    %g = terra.feed 2 : tensor<16x6xf32>
    %mom = terra.feed 3 : tensor<f32>
    %m = terra.op "aten._foreach_mul_.Scalar"(%p, %mom) : (tensor<16x6xf32>, tensor<f32>) -> tensor<16x6xf32>
    %lr = terra.feed 4 : tensor<f32>
    %u = terra.op "aten._foreach_add_.List"(%m, %g, %lr) : (tensor<16x6xf32>, tensor<16x6xf32>, tensor<f32>) -> tensor<16x6xf32>
    terra.fetch 0 %u : tensor<16x6xf32>
    %x = terra.feed 5 : tensor<2x3x5x5xf32>
    %pool = terra.op "aten.avg_pool2d"(%x) args {kernel_size = [3, 3], stride = [2, 2], padding = [1, 1], ceil_mode = false, count_include_pad = false} : (tensor<2x3x5x5xf32>) -> tensor<2x3x3x3xf32>
    terra.fetch 1 %pool : tensor<2x3x3x3xf32>
    %ad = terra.op "aten._adaptive_avg_pool2d"(%x) args {output_size = [3, 3]} : (tensor<2x3x5x5xf32>) -> tensor<2x3x3x3xf32>
    terra.fetch 2 %ad : tensor<2x3x3x3xf32>
  }
}
"""


def library(mlir):
    """The bundle's library for a graph: cases sharing a graph share it,
    named after the first of them (graphs/<name>.so)."""
    return next(name for name, text, *_ in CASES if text == mlir)


def _split_reductions(f):
    x, y = f[1].double(), f[2].double()
    return {0: f[1].amax(1), 1: x.sum(1).float(), 2: x.sum().float(), 3: y.exp().sum().float()}


def _pointwise(f):
    import torch
    return {0: torch.sigmoid(torch.tanh(f[1] * f[2] + f[1]))}


def _softmax_reduce_linear(f):
    import torch
    m = torch.softmax(f[1], -1)
    return {0: torch.relu(torch.addmm(f[3], m, f[2])), 1: f[1].sum(0), 2: f[1].amax()}


def _layernorm_bmm(f):
    import torch
    return {0: torch.nn.functional.layer_norm(f[1], [64], f[2], f[3], 1e-5),
            1: torch.bmm(f[4], f[5])}


def _sgd_step(f):
    import torch
    w = f[2].clone().requires_grad_()
    loss = torch.nn.functional.mse_loss(f[1] @ w, f[3])
    loss.backward()
    return {0: loss.detach(), 1: (w - 0.1 * w.grad).detach()}


def _switch_loop(case, trips):
    def ref(f):
        z = f[1] * f[2] if case == 0 else f[1].exp()
        for _ in range(trips):
            z = z * z
        return {0: z}
    return ref


def _full_sum_f64(f):
    return {0: f[1].sum(), 1: f[1].exp()}


def _convolutions(f):
    import torch
    x, w, dy = f[1].clone().requires_grad_(), f[2].clone().requires_grad_(), f[4]
    b = f[3].clone().requires_grad_()
    y = torch.nn.functional.conv2d(x, w, b, stride=2, padding=1, groups=2)
    y.backward(dy)
    ty = torch.nn.functional.conv_transpose2d(f[5], f[6], stride=2, padding=1)
    return {0: y.detach(), 1: x.grad, 2: w.grad, 3: b.grad, 4: ty}


def _scans_diagonals(f):
    import torch
    x, m = f[1], f[2]
    var, mean = torch.var_mean(x, 1, unbiased=True, keepdim=True)
    e = torch.diagonal_scatter(m, torch.diagonal(m, -2), 2, 1, 0)
    idx = torch.arange(15, 0, -3, device=m.device)
    w = f[4]
    back = torch.zeros(3, 24, dtype=w.dtype, device=w.device)
    for i in range(10):
        back[:, 2 * i:2 * i + 5] += w[:, i]
    return {0: var, 1: mean, 2: torch.std(x, 0, unbiased=False), 3: x.cumsum(1), 4: e,
            5: torch.diagonal(e), 6: x.unfold(1, 5, 2), 7: back, 8: m.index_add(1, idx, f[3])}


def _host_reads(f):
    import torch.nn.functional as F
    return {0: f[1] * f[3] + f[2] * f[4],
            1: F.avg_pool2d(f[5], 3, 2, 1, count_include_pad=False),
            2: F.adaptive_avg_pool2d(f[5], (3, 3))}


def _gemm(f):
    return {0: f[1] @ f[2]}


def _transposed_gemms(f):
    h = (f[1] @ f[2]).relu()
    return {0: h.t() @ f[3], 1: h @ f[2].t(), 2: f[4].relu() @ f[5].relu().transpose(-2, -1)}


_CONV_FEEDS = {1: ((2, 4, 9, 7), "float32"), 2: ((6, 2, 3, 3), "float32"), 3: ((6,), "float32"),
               4: ((2, 6, 5, 4), "float32"), 5: ((2, 8, 4, 4), "float32"), 6: ((8, 4, 4, 4), "float32")}

CASES = [
    # name, mlir, feeds {id: (shape, dtype)}, decisions, reference, rtol, atol
    ("pointwise", POINTWISE, {1: ((1000, 513), "float32"), 2: ((513,), "float32")},
     [], _pointwise, 1e-5, 1e-6),
    ("softmax_reduce_linear", SOFTMAX_REDUCE_LINEAR,
     {1: ((300, 64), "float32"), 2: ((64, 32), "float32"), 3: ((32,), "float32")},
     [], _softmax_reduce_linear, 1e-4, 1e-5),
    ("layernorm_bmm", LAYERNORM_BMM,
     {1: ((257, 64), "float32"), 2: ((64,), "float32"), 3: ((64,), "float32"),
      4: ((4, 37, 32), "float32"), 5: ((4, 32, 16), "float32")},
     [], _layernorm_bmm, 1e-4, 1e-5),
    ("sgd_step", SGD_STEP,
     {1: ((96, 16), "float32"), 2: ((16, 8), "float32"), 3: ((96, 8), "float32")},
     [], _sgd_step, 1e-4, 1e-5),
    ("switch_case0_loop2", SWITCH_LOOP, {1: ((33, 4), "float32"), 2: ((4,), "float32")},
     ["--case", "5=0", "--loop", "7=1", "--loop", "7=1", "--loop", "7=0"],
     _switch_loop(0, 2), 1e-5, 1e-6),
    ("switch_case1_loop0", SWITCH_LOOP, {1: ((33, 4), "float32"), 2: ((4,), "float32")},
     ["--case", "5=1", "--loop", "7=0"], _switch_loop(1, 0), 1e-5, 1e-6),
    ("full_sum_f64", FULL_SUM_F64, {1: ((100003,), "float64")}, [], _full_sum_f64, 1e-10, 1e-10),
    ("split_reductions", SPLIT_REDUCTIONS, {1: ((8, 50000), "float32"), 2: ((70001,), "float32")},
     [], _split_reductions, 1e-4, 1e-3),
    ("split_reductions_small", SPLIT_REDUCTIONS, {1: ((8, 50000), "float32"), 2: ((100,), "float32")},
     [], _split_reductions, 1e-4, 1e-3),
    ("gemm", GEMM, {1: ((2048, 2048), "float32"), 2: ((2048, 2048), "float32")}, [], _gemm,
     1e-3, 1e-3),
    ("transposed_gemms", TRANSPOSED_GEMMS,
     {1: ((70, 48), "float32"), 2: ((48, 24), "float32"), 3: ((70, 24), "float32"),
      4: ((4, 33, 16), "float32"), 5: ((4, 29, 16), "float32")},
     [], _transposed_gemms, 1e-4, 1e-4),
    ("convolutions_f64", CONVOLUTIONS_F64, {k: (shape, "float64") for k, (shape, _) in _CONV_FEEDS.items()},
     [], _convolutions, 1e-9, 1e-9),
    ("convolutions_f32", CONVOLUTIONS_F32, _CONV_FEEDS, [], _convolutions, 5e-3, 5e-3),
    ("scans_diagonals", SCANS_DIAGONALS, {1: ((37, 24), "float32"), 2: ((16, 16), "float32"),
                                          3: ((16, 5), "float32"), 4: ((3, 10, 5), "float32")},
     [], _scans_diagonals, 1e-5, 1e-5),
    ("host_reads", HOST_READS, {1: ((16, 6), "float32"), 2: ((16, 6), "float32"), 3: ((), "float32"),
                                4: ((), "float32"), 5: ((2, 3, 5, 5), "float32")},
     [], _host_reads, 1e-5, 1e-5),
]
