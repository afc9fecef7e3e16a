#!/usr/bin/env python3
"""Writes docs/coverage.md: what Kiln has against torch and Burn (issue 20).

    python3 scripts/coverage.py           # rewrite docs/coverage.md
    python3 scripts/coverage.py --check   # exit 1, with a diff, if the page is stale

The torch and Burn columns are the curated lists below (plain data: add a row to extend
them). The Kiln column is read from the code: an entry is present when its pattern matches
a declaration in Kiln's user-facing headers under include/kiln (tensor/, nn/, optim/,
train/; see CATEGORIES) or, for metrics, a file under src/train. Backend, autodiff, codegen
and ONNX-importer internals are not searched, and comments and string literals are blanked
before matching, so a header that only mentions a name (a "torch's cummax" in a comment, an
error message) does not count.

Standard library only.
"""
from __future__ import annotations

import argparse
import difflib
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "coverage.md"

# The Burn release the Burn column reflects (its crates' sources on docs.rs: burn-tensor,
# burn-nn, burn-optim, burn-train; burn-linalg for the linear-algebra helpers).
BURN_RELEASE = "0.22"


# ---- patterns: how an entry finds its Kiln counterpart

def decl(*names: str) -> str:
    """A declaration (not a call) of a function or method called one of `names`: the name
    follows a type (`Self cumsum(`, `Tensor<B, 4> conv2d(`, `auto movedim(`), not a `.`,
    `::` or `return`; or a method declared by the elementwise ops' macros
    (`KILN_UNARY_METHOD(exp, ...)`, which declares `exp` for a kept and a given-up tensor)."""
    alt = "|".join(re.escape(n) for n in names)
    return rf"(?:[\w>&*\]]\s+(?<!\breturn\s)(?:{alt})\s*\(|\bKILN_(?:UNARY|BINARY)_METHOD\((?:{alt}),)"


def fdecl(*names: str) -> str:
    """A free function called one of `names` (kiln::functional's style: the declaration starts
    its line, as `Tensor<B, 4> conv2d(` does), so that a module's member of the same name
    (LayerNorm::normalize) does not count."""
    alt = "|".join(re.escape(n) for n in names)
    return rf"(?m)^[^\s;{{}}][^;{{}}\n]*?[\w>&*\]]\s+(?:{alt})\s*\("


def module(*names: str) -> str:
    """A module type called one of `names`: a struct or class, an alias (`using BatchNorm2d =`)
    or one of layers.hpp's activation macros (`KILN_NN_ACTIVATION(Relu, ...)`)."""
    alt = "|".join(re.escape(n) for n in names)
    return (rf"\b(?:struct|class)\s+(?:{alt})\b(?!\s*;)"
            rf"|\busing\s+(?:{alt})\s*="
            rf"|\bKILN_NN_ACTIVATION\w*\(\s*(?:{alt})\s*,")


def field(*names: str) -> str:
    """A member or option called one of `names` (`padding_mode`, `proj_size`)."""
    alt = "|".join(re.escape(n) for n in names)
    return rf"\b(?:{alt})\b"


def E(torch, burn, kiln, pattern, files=None):
    """One row. torch: the torch / torchvision / torchmetrics name (rows beyond torch are made
    with X); burn: Burn's name in BURN_RELEASE where it was found there, else None; kiln: how
    Kiln spells it, printed when the pattern matches; pattern: a regex over the category's
    files (see decl, fdecl, module, field); files: optional path fragments the match must
    come from."""
    return {"torch": torch, "burn": burn, "kiln": kiln, "pattern": pattern, "files": files}


def X(label, burn, kiln, pattern, files=None):
    """A row beyond torch (not counted against torch): `label` names the thing."""
    row = E(None, burn, kiln, pattern, files)
    row["label"] = label
    return row


# ---- the curated lists
# Each category: (title, roots searched, [(section title, [rows])]).

T = "Tensor::"  # Burn's Tensor methods, written Tensor::name

TENSOR_OPS = [
    ("Creation", [
        E("torch.tensor", f"`{T}from_data`", "`Tensor::from({{...}})`", decl("from")),
        E("torch.zeros / torch.ones / torch.full", f"`{T}zeros` / `ones` / `full`", "`Tensor::zeros` / `ones` / `full`", decl("zeros", "full")),
        E("torch.zeros_like / ones_like / full_like", f"`{T}zeros_like` / `ones_like` / `full_like`", "`t.zeros_like()` / `ones_like()` / `full_like(v)`", decl("zeros_like", "full_like")),
        E("torch.empty", f"`{T}empty`", "`Tensor::empty`", r"\bstatic\s+\w+\s+empty\s*\("),
        E("torch.arange", f"`{T}arange` / `arange_step`", "`Tensor::arange(start, end, step)`", decl("arange")),
        E("torch.linspace", None, "`Tensor::linspace`", decl("linspace")),
        E("torch.eye", f"`{T}eye`", "`Tensor::eye(n)`", decl("eye")),
        E("torch.rand / torch.randn / torch.bernoulli", f"`{T}random` (`Distribution`)", "`Tensor::random(dims, Distribution::...)`", decl("random")),
        E("torch.Tensor.to(dtype)", f"`{T}cast`", "`t.cast(dtype)` / `to_float` / `to_int` / `to_bool`", decl("cast")),
        E("torch.Tensor.to(device)", f"`{T}to_device`", "`t.to_device(device)`", decl("to_device")),
        E("torch.Tensor.item", f"`{T}into_scalar`", "`t.item()`", decl("item")),
        E("torch.Tensor.tolist / numpy", f"`{T}into_data` / `to_data`", "`t.into_data()` / `to_vec<T>()`", decl("into_data")),
    ]),
    ("Autograd", [
        E("torch.Tensor.requires_grad_", f"`{T}require_grad`", "`t.require_grad()`", decl("require_grad")),
        E("torch.Tensor.backward", f"`{T}backward`", "`t.backward()`", decl("backward")),
        E("torch.Tensor.grad", f"`{T}grad`", "`t.grad(grads)`", decl("grad")),
        E("torch.Tensor.detach", f"`{T}detach`", "`t.detach()`", decl("detach")),
    ]),
    ("Pointwise math", [
        E("torch.add / sub / mul / div", f"`{T}add` / `sub` / `mul` / `div`", "`add` / `sub` / `mul` / `div`, `+ - * /`", decl("add")),
        E("torch.remainder", f"`{T}remainder`", "`t.rem(o)`, `%`", decl("rem")),
        E("torch.fmod", f"`{T}fmod`", "`t.fmod(o)`", decl("fmod")),
        E("torch.pow", f"`{T}powf` / `powf_scalar`", "`t.pow(o)`", decl("pow")),
        E("torch.neg", f"`{T}neg`", "`t.neg()`, unary `-`", decl("neg")),
        E("torch.abs", f"`{T}abs`", "`t.abs()`", decl("abs")),
        E("torch.sign", f"`{T}sign`", "`t.sign()`", decl("sign")),
        E("torch.exp", f"`{T}exp`", "`t.exp()`", decl("exp")),
        E("torch.exp2", None, "`t.exp2()`", decl("exp2")),
        E("torch.expm1", None, "`t.expm1()`", decl("expm1")),
        E("torch.log", f"`{T}log`", "`t.log()`", decl("log")),
        E("torch.log2", None, "`t.log2()`", decl("log2")),
        E("torch.log10", None, "`t.log10()`", decl("log10")),
        E("torch.log1p", f"`{T}log1p`", "`t.log1p()`", decl("log1p")),
        E("torch.sqrt", f"`{T}sqrt`", "`t.sqrt()`", decl("sqrt")),
        E("torch.rsqrt", None, "`t.rsqrt()`", decl("rsqrt")),
        E("torch.reciprocal", f"`{T}recip`", "`t.recip()`", decl("recip")),
        E("torch.square", f"`{T}square`", "`t.square()`", decl("square")),
        E("torch.sin / cos", f"`{T}sin` / `cos`", "`t.sin()` / `cos()`", decl("sin")),
        E("torch.tan", f"`{T}tan`", "`t.tan()`", decl("tan")),
        E("torch.asin / acos / atan", f"`{T}asin` / `acos` / `atan`", "`t.asin()` / `acos()` / `atan()`", decl("asin")),
        E("torch.atan2", f"`{T}atan2`", "`t.atan2(o)`", decl("atan2")),
        E("torch.sinh / cosh", f"`{T}sinh` / `cosh`", "`t.sinh()` / `cosh()`", decl("sinh")),
        E("torch.tanh", f"`{T}tanh`", "`t.tanh()`", decl("tanh")),
        E("torch.asinh / acosh / atanh", f"`{T}asinh` / `acosh` / `atanh`", "`t.asinh()` / `acosh()` / `atanh()`", decl("asinh")),
        E("torch.erf", f"`{T}erf`", "`t.erf()`", decl("erf")),
        E("torch.erfinv", None, "`t.erfinv()`", decl("erfinv")),
        E("torch.floor / ceil", f"`{T}floor` / `ceil`", "`t.floor()` / `ceil()`", decl("floor")),
        E("torch.round", f"`{T}round`", "`t.round()`", decl("round")),
        E("torch.trunc", f"`{T}trunc`", "`t.trunc()`", decl("trunc")),
        E("torch.frac", None, "`t.frac()`", decl("frac")),
        E("torch.clamp", f"`{T}clamp` / `clamp_min` / `clamp_max`", "`t.clamp(lo, hi)` / `clamp_min` / `clamp_max`", decl("clamp")),
        E("torch.maximum / minimum", f"`{T}max_pair` / `min_pair`", "`t.maximum(o)` / `minimum(o)`", decl("maximum")),
        E("torch.hypot", None, "`t.hypot(o)`", decl("hypot")),
        E("torch.copysign", None, "`t.copysign(o)`", decl("copysign")),
        E("torch.logaddexp", None, "`t.logaddexp(o)`", decl("logaddexp")),
        E("torch.lerp", None, "`t.lerp(end, weight)`", decl("lerp")),
        E("torch.where", f"`{T}mask_where`", "`where(cond, a, b)`, `t.mask_where(mask, v)`", decl("where", "mask_where")),
        E("torch.Tensor.masked_fill", f"`{T}mask_fill`", "`t.mask_fill(mask, v)`", decl("mask_fill")),
        E("torch.nan_to_num", None, "`t.nan_to_num()`", decl("nan_to_num")),
    ]),
    ("Comparison and logic", [
        E("torch.eq / ne", f"`{T}equal` / `not_equal`", "`t.eq(o)` / `ne(o)`", decl("eq")),
        E("torch.lt / le / gt / ge", f"`{T}lower` / `lower_equal` / `greater` / `greater_equal`", "`t.lt(o)` / `le` / `gt` / `ge`", decl("lt")),
        E("torch.isnan / isinf", f"`{T}is_nan` / `is_inf`", "`t.isnan()` / `isinf()`", decl("isnan")),
        E("torch.isfinite", f"`{T}is_finite`", "`t.isfinite()`", decl("isfinite")),
        E("torch.isclose / allclose", f"`{T}is_close` / `all_close`", "`t.isclose(o)` / `allclose(o)`", decl("isclose", "allclose")),
        E("torch.logical_and / or / not", f"`{T}bool_and` / `bool_or` / `bool_not`", "`logical_and` / `logical_or` / `logical_not`, `& | !`", decl("logical_and")),
        E("torch.logical_xor", f"`{T}bool_xor`", "`t.logical_xor(o)`, `^`", decl("logical_xor")),
        E("torch.bitwise_and / or / xor / not", f"`{T}bitwise_and` / `bitwise_or` / `bitwise_xor` / `bitwise_not`", "`t.bitwise_and(o)` ...", decl("bitwise_and")),
        E("torch.bitwise_left_shift / right_shift", f"`{T}bitwise_left_shift` / `bitwise_right_shift`", "`t.bitwise_left_shift(o)` ...", decl("bitwise_left_shift")),
    ]),
    ("Reductions", [
        E("torch.sum", f"`{T}sum` / `sum_dim`", "`t.sum()` / `sum_dim(d)`", decl("sum_dim")),
        E("torch.mean", f"`{T}mean` / `mean_dim`", "`t.mean()` / `mean_dim(d)`", decl("mean_dim")),
        E("torch.prod", f"`{T}prod` / `prod_dim`", "`t.prod()` / `prod_dim(d)`", decl("prod_dim")),
        E("torch.max / min (values and indices)", f"`{T}max_dim_with_indices` / `min_dim_with_indices`", "`t.max_dim(d)`, `max_dim_with_indices(d)`, `min...`", decl("max_dim_with_indices")),
        E("torch.amax / amin", f"`{T}max_dim` / `min_dim`", "`t.max_dim(d)` / `min_dim(d)`", decl("max_dim")),
        E("torch.argmax / argmin", f"`{T}argmax` / `argmin`", "`t.argmax(d)` / `argmin(d)`", decl("argmax")),
        E("torch.var", f"`{T}var`", "`t.var(d, correction)`", decl("var")),
        E("torch.std", None, "`t.std(d, correction)`", decl("std")),
        E("torch.linalg.vector_norm / torch.norm", "`linalg::vector_norm` (burn-linalg)", "`t.norm(p)` / `norm_dim(p, d)`", decl("norm", "norm_dim")),
        E("torch.logsumexp", None, "`t.logsumexp(d)`", decl("logsumexp")),
        E("torch.any / all", f"`{T}any` / `all` / `any_dim` / `all_dim`", "`t.any()` / `all()` / `any_dim(d)` / `all_dim(d)`", decl("any_dim")),
        E("torch.count_nonzero", None, "`t.count_nonzero()`", decl("count_nonzero")),
        E("torch.median", f"`{T}median` / `median_with_indices`", "`t.median(d)`", decl("median")),
        E("torch.quantile", None, "`t.quantile(q, d)`", decl("quantile")),
    ]),
    ("Scans", [
        E("torch.cumsum", f"`{T}cumsum`", "`t.cumsum(d)`", decl("cumsum")),
        E("torch.cumprod", f"`{T}cumprod`", "`t.cumprod(d)`", decl("cumprod")),
        E("torch.cummax", f"`{T}cummax`", "`t.cummax(d)`", decl("cummax")),
        E("torch.cummin", f"`{T}cummin`", "`t.cummin(d)`", decl("cummin")),
        E("torch.logcumsumexp", None, "`t.logcumsumexp(d)`", decl("logcumsumexp")),
        E("torch.diff", None, "`t.diff(d)`", decl("diff")),
    ]),
    ("Sorting and searching", [
        E("torch.sort", f"`{T}sort` / `sort_with_indices`", "`t.sort(d, descending)` / `sort_with_indices`", decl("sort")),
        E("torch.argsort", f"`{T}argsort`", "`t.argsort(d, descending)`", decl("argsort")),
        E("torch.topk", f"`{T}topk` / `topk_with_indices`", "`t.topk(k, d)` / `topk_with_indices`", decl("topk")),
        E("torch.kthvalue", None, "`t.kthvalue(k, d)`", decl("kthvalue")),
        E("torch.nonzero", f"`{T}nonzero`", "`t.nonzero()`", decl("nonzero")),
        E("torch.argwhere", f"`{T}argwhere`", "`t.argwhere()`", decl("argwhere")),
        E("torch.masked_select", None, "`t.masked_select(mask)`", decl("masked_select")),
        E("torch.unique", None, "`t.unique()`", decl("unique")),
        E("torch.bincount", None, "`t.bincount()`", decl("bincount")),
        E("torch.histc", None, "`t.histc(bins, lo, hi)`", decl("histc")),
        E("torch.searchsorted", None, "`searchsorted(sorted, values)`", decl("searchsorted")),
        E("torch.bucketize", None, "`bucketize(values, boundaries)`", decl("bucketize")),
    ]),
    ("Indexing, slicing, joining", [
        E("torch.cat", f"`{T}cat`", "`cat(tensors, d)`", decl("cat")),
        E("torch.stack", f"`{T}stack`", "`stack(tensors, d)`", decl("stack")),
        E("torch.split", f"`{T}split` / `split_with_sizes`", "`t.split(size, d)` / `split_sizes`", decl("split")),
        E("torch.chunk", f"`{T}chunk`", "`t.chunk(n, d)`", decl("chunk")),
        E("torch.narrow", f"`{T}narrow`", "`t.narrow(d, start, len)`", decl("narrow")),
        E("t[a:b, ::s] (basic slicing)", f"`{T}slice`", "`t.slice({Slice(a, b), ...})`", decl("slice")),
        E("t[a:b] = v (slice assignment)", f"`{T}slice_assign`", "`t.slice_assign({...}, v)`", decl("slice_assign")),
        E("torch.gather", f"`{T}gather`", "`t.gather(d, index)`", decl("gather")),
        E("torch.scatter", f"`{T}scatter` (`IndexingUpdateOp::Assign`)", "`t.scatter(d, index, src)`", decl("scatter")),
        E("torch.scatter_add", f"`{T}scatter` (`IndexingUpdateOp::Add`)", "`t.scatter_add(d, index, src)`", decl("scatter_add")),
        E("torch.index_select", f"`{T}select`", "`t.index_select(d, index)`", decl("index_select")),
        E("torch.index_add", f"`{T}select_assign`", "`t.index_add(d, index, v)`", decl("index_add")),
        E("torch.reshape / view", f"`{T}reshape`", "`t.reshape<R>({...})`", decl("reshape")),
        E("torch.flatten", f"`{T}flatten`", "`t.flatten<R>(start, end)`", decl("flatten")),
        E("torch.squeeze", f"`{T}squeeze` / `squeeze_dim`", "`t.squeeze_dim(d)`", decl("squeeze", "squeeze_dim")),
        E("torch.unsqueeze", f"`{T}unsqueeze` / `unsqueeze_dim`", "`t.unsqueeze_dim(d)` / `unsqueeze<R>()`", decl("unsqueeze_dim")),
        E("torch.permute", f"`{T}permute`", "`t.permute({...})`", decl("permute")),
        E("torch.transpose / swapaxes", f"`{T}swap_dims` / `transpose`", "`t.swap_dims(a, b)` / `transpose()`", decl("swap_dims")),
        E("torch.movedim", f"`{T}movedim`", "`t.movedim(src, dst)`", decl("movedim")),
        E("torch.Tensor.expand / expand_as", f"`{T}expand`", "`t.expand({...})` / `expand_as`", decl("expand")),
        E("torch.Tensor.repeat / torch.tile", f"`{T}repeat` / `repeat_dim`", "`t.repeat({...})`", decl("repeat")),
        E("torch.repeat_interleave", None, "`t.repeat_interleave(n, d)`", decl("repeat_interleave")),
        E("torch.flip", f"`{T}flip`", "`t.flip({dims})`", decl("flip")),
        E("torch.roll", f"`{T}roll` / `roll_dim`", "`t.roll(shift, d)`", decl("roll")),
        E("torch.tril / triu", f"`{T}tril` / `triu`", "`t.tril(k)` / `triu(k)`", decl("tril")),
        E("torch.nn.functional.pad", f"`{T}pad`", "`t.pad({...}, PadMode)`", decl("pad")),
        E("torch.nn.functional.one_hot", f"`{T}one_hot`", "`t.one_hot(classes)`", decl("one_hot")),
    ]),
    ("Linear algebra", [
        E("torch.matmul", f"`{T}matmul`", "`t.matmul(o)`", decl("matmul")),
        E("torch.bmm", f"`{T}matmul` (batched)", "`t.matmul(o)` (batch dims broadcast)", decl("matmul", "bmm")),
        E("torch.einsum", "`einsum!` / `Tensor::einsum`", "`einsum(\"ij,jk->ik\", ...)`", decl("einsum")),
        E("torch.dot", None, "`dot(a, b)`", decl("dot")),
        E("torch.outer", "`linalg::outer` (burn-linalg)", "`outer(a, b)`", decl("outer")),
        E("torch.linalg.cross", f"`{T}cross`", "`cross(a, b, d)`", decl("cross")),
        E("torch.diag", "`linalg::diag` (burn-linalg)", "`diag(t)`", decl("diag")),
        E("torch.diagonal", None, "`t.diagonal(offset)`", decl("diagonal")),
        E("torch.trace", "`linalg::trace` (burn-linalg)", "`trace(t)`", decl("trace")),
        E("torch.linalg.det", "`linalg::det` (burn-linalg)", "`det(t)`", decl("det")),
        E("torch.linalg.qr", "`linalg::qr` (burn-linalg)", "`qr(t)`", decl("qr")),
        E("torch.linalg.lu", "`linalg::lu` (burn-linalg)", "`lu(t)`", decl("lu", "lu_factor")),
        E("torch.linalg.inv", None, "`inv(t)`", decl("inv", "inverse")),
        E("torch.cdist", None, "`cdist(a, b, p)`", decl("cdist")),
    ]),
]


N = "torch.nn."
F = "torch.nn.functional."

MODULES = [
    ("Initialization (torch.nn.init)", [
        E(N + "init.uniform_ / normal_", "`Initializer::Uniform` / `Normal`", "`nn::Init::uniform(lo, hi)` / `normal(mean, std)`", decl("uniform")),
        E(N + "init.constant_ / zeros_ / ones_", "`Initializer::Constant` / `Zeros` / `Ones`", "`nn::Init::constant(v)` / `zeros()` / `ones()`", decl("constant")),
        E(N + "init.xavier_uniform_ / xavier_normal_", "`Initializer::XavierUniform` / `XavierNormal`", "`nn::Init::xavier_uniform(gain)` / `xavier_normal(gain)`", decl("xavier_uniform")),
        E(N + "init.kaiming_uniform_ / kaiming_normal_", "`Initializer::KaimingUniform` / `KaimingNormal`", "`nn::Init::kaiming_uniform(a, mode)` / `kaiming_normal(a, mode)`", decl("kaiming_uniform")),
        E(N + "init.orthogonal_", "`Initializer::Orthogonal`", "`nn::Init::orthogonal(gain)`", decl("orthogonal")),
        E(N + "init.trunc_normal_", None, "`nn::Init::trunc_normal(...)`", decl("trunc_normal")),
    ]),
    ("Containers and utilities", [
        E(N + "Sequential", None, "`nn::Sequential<...>`", module("Sequential")),
        E(N + "Identity", "`Identity`", "`nn::Identity`", module("Identity")),
        E(N + "Flatten", None, "`nn::Flatten`", module("Flatten")),
        E(N + "Unflatten", None, "`nn::Unflatten`", module("Unflatten")),
        E(N + "ModuleList", "`Vec<M>` fields", "`std::vector<M>` / `std::array<M, N>` fields", r"\bstruct\s+IsSequence<\s*std::vector<"),
    ]),
    ("Convolution", [
        E(N + "Conv1d", "`Conv1d`", "`nn::Conv1d`", module("Conv1d")),
        E(N + "Conv2d", "`Conv2d`", "`nn::Conv2d`", module("Conv2d")),
        E(N + "Conv3d", "`Conv3d`", "`nn::Conv3d`", module("Conv3d")),
        E(N + "ConvTranspose1d", "`ConvTranspose1d`", "`nn::ConvTranspose1d`", module("ConvTranspose1d")),
        E(N + "ConvTranspose2d", "`ConvTranspose2d`", "`nn::ConvTranspose2d`", module("ConvTranspose2d")),
        E(N + "ConvTranspose3d", "`ConvTranspose3d`", "`nn::ConvTranspose3d`", module("ConvTranspose3d")),
        E(N + "Conv2d(padding_mode=...)", None, "`padding_mode` option", field("padding_mode", "PaddingMode"), files=("nn/conv", "tensor/conv", "ops/nn")),
        E(N + "Unfold", "`Unfold4d`", "`nn::Unfold` / `functional::unfold`", module("Unfold") + "|" + decl("unfold")),
        E(N + "Fold", "`Fold4d`", "`nn::Fold` / `functional::fold`", module("Fold") + "|" + decl("fold")),
    ]),
    ("Pooling", [
        E(N + "MaxPool1d", "`MaxPool1d`", "`nn::MaxPool1d`", module("MaxPool1d")),
        E(N + "MaxPool2d", "`MaxPool2d`", "`nn::MaxPool2d`", module("MaxPool2d")),
        E(N + "MaxPool3d", None, "`nn::MaxPool3d`", module("MaxPool3d")),
        E(N + "MaxUnpool2d", None, "`nn::MaxUnpool2d`", module("MaxUnpool2d")),
        E(N + "AvgPool1d", "`AvgPool1d`", "`nn::AvgPool1d`", module("AvgPool1d")),
        E(N + "AvgPool2d", "`AvgPool2d`", "`nn::AvgPool2d`", module("AvgPool2d")),
        E(N + "AvgPool3d", None, "`nn::AvgPool3d`", module("AvgPool3d")),
        E(N + "LPPool2d", None, "`nn::LpPool2d`", module("LpPool2d", "LPPool2d")),
        E(N + "AdaptiveMaxPool1d", None, "`nn::AdaptiveMaxPool1d`", module("AdaptiveMaxPool1d")),
        E(N + "AdaptiveMaxPool2d", None, "`nn::AdaptiveMaxPool2d`", module("AdaptiveMaxPool2d")),
        E(N + "AdaptiveAvgPool1d", "`AdaptiveAvgPool1d`", "`nn::AdaptiveAvgPool1d`", module("AdaptiveAvgPool1d")),
        E(N + "AdaptiveAvgPool2d", "`AdaptiveAvgPool2d`", "`nn::AdaptiveAvgPool2d`", module("AdaptiveAvgPool2d")),
    ]),
    ("Padding", [
        E(N + "ZeroPad2d / ConstantPad2d", None, "`nn::zero_pad2d` / `constant_pad2d` (an `nn::Pad`)",
          decl("zero_pad2d", "constant_pad2d")),
        E(N + "ReflectionPad2d", None, "`nn::reflection_pad2d` (an `nn::Pad`)", decl("reflection_pad2d")),
        E(N + "ReplicationPad2d", None, "`nn::replication_pad2d` (an `nn::Pad`)", decl("replication_pad2d")),
    ]),
    ("Activations", [
        E(N + "ReLU", "`Relu`", "`nn::Relu`", module("Relu")),
        E(N + "ReLU6", "`Relu6`", "`nn::Relu6`", module("Relu6")),
        E(N + "LeakyReLU", "`LeakyRelu`", "`nn::LeakyRelu`", module("LeakyRelu")),
        E(N + "PReLU", "`PRelu`", "`nn::PRelu`", module("PRelu")),
        E(N + "RReLU", None, "`nn::RRelu`", module("RRelu")),
        E(N + "ELU", "`Elu`", "`nn::Elu`", module("Elu")),
        E(N + "SELU", "`Selu`", "`nn::Selu`", module("Selu")),
        E(N + "CELU", "`Celu`", "`nn::Celu`", module("Celu")),
        E(N + "GELU", "`Gelu`", "`nn::Gelu`", module("Gelu")),
        E(N + "SiLU", "`SiLU`", "`nn::Silu`", module("Silu")),
        E(N + "Mish", "`Mish`", "`nn::Mish`", module("Mish")),
        E(N + "Sigmoid", "`Sigmoid`", "`nn::Sigmoid`", module("Sigmoid")),
        E(N + "LogSigmoid", "`LogSigmoid`", "`nn::LogSigmoid`", module("LogSigmoid")),
        E(N + "Hardsigmoid", "`HardSigmoid`", "`nn::HardSigmoid`", module("HardSigmoid")),
        E(N + "Hardswish", "`HardSwish`", "`nn::HardSwish`", module("HardSwish")),
        E(N + "Tanh", "`Tanh`", "`nn::Tanh`", module("Tanh")),
        E(N + "Hardtanh", None, "`nn::Hardtanh`", module("Hardtanh")),
        E(N + "Softplus", "`Softplus`", "`nn::Softplus`", module("Softplus")),
        E(N + "Softsign", "`Softsign`", "`nn::Softsign`", module("Softsign")),
        E(N + "Softshrink", "`SoftShrink`", "`nn::Softshrink`", module("Softshrink")),
        E(N + "Hardshrink", "`HardShrink`", "`nn::Hardshrink`", module("Hardshrink")),
        E(N + "Tanhshrink", None, "`nn::Tanhshrink`", module("Tanhshrink")),
        E(N + "Threshold", None, "`nn::Threshold`", module("Threshold")),
        E(N + "GLU", "`Glu`", "`nn::Glu`", module("Glu")),
        E(N + "Softmax", None, "`nn::Softmax`", module("Softmax")),
        E(N + "Softmin", None, "`nn::Softmin`", module("Softmin")),
        E(N + "LogSoftmax", None, "`nn::LogSoftmax`", module("LogSoftmax")),
        E(N + "MultiheadAttention", "`MultiHeadAttention`", "`nn::MultiHeadAttention`", module("MultiHeadAttention")),
        X("SwiGLU (no torch.nn class)", "`SwiGlu`", "`nn::SwiGlu`", module("SwiGlu")),
    ]),
    ("Normalization", [
        E(N + "BatchNorm1d / BatchNorm2d", "`BatchNorm`", "`nn::BatchNorm1d` / `BatchNorm2d` (`nn::BatchNorm`)", module("BatchNorm")),
        E(N + "BatchNorm3d", "`BatchNorm`", "`nn::BatchNorm3d`", module("BatchNorm3d")),
        E(N + "LayerNorm", "`LayerNorm`", "`nn::LayerNorm`", module("LayerNorm")),
        E(N + "GroupNorm", "`GroupNorm`", "`nn::GroupNorm`", module("GroupNorm")),
        E(N + "InstanceNorm1d / InstanceNorm2d", "`InstanceNorm`", "`nn::InstanceNorm1d` / `InstanceNorm2d`", module("InstanceNorm")),
        E(N + "RMSNorm", "`RmsNorm`", "`nn::RmsNorm`", module("RmsNorm")),
        E(N + "LocalResponseNorm", "`LocalResponseNorm`", "`nn::LocalResponseNorm`", module("LocalResponseNorm")),
    ]),
    ("Recurrent", [
        E(N + "RNN", "basic RNN (`rnn::basic`)", "`nn::Rnn`", module("Rnn")),
        E(N + "LSTM", "`Lstm` / `BiLstm`", "`nn::Lstm`", module("Lstm")),
        E(N + "LSTM(proj_size=...)", None, "`proj_size` option", field("proj_size"), files=("nn/rnn",)),
        E(N + "GRU", "`Gru`", "`nn::Gru`", module("Gru")),
        E(N + "RNNCell", None, "`nn::RnnCell`", module("RnnCell")),
        E(N + "LSTMCell", None, "`nn::LstmCell`", module("LstmCell")),
        E(N + "GRUCell", None, "`nn::GruCell`", module("GruCell")),
    ]),
    ("Transformer", [
        E(N + "Transformer", None, "`nn::Transformer`", module("Transformer")),
        E(N + "TransformerEncoder", "`TransformerEncoder`", "`nn::TransformerEncoder`", module("TransformerEncoder")),
        E(N + "TransformerDecoder", "`TransformerDecoder`", "`nn::TransformerDecoder`", module("TransformerDecoder")),
        E(N + "TransformerEncoderLayer", "`TransformerEncoderLayer`", "`nn::TransformerEncoderLayer`", module("TransformerEncoderLayer")),
        E(N + "TransformerDecoderLayer", "`TransformerDecoderLayer`", "`nn::TransformerDecoderLayer`", module("TransformerDecoderLayer")),
        X("Sinusoidal positional encoding (no torch.nn class)", "`PositionalEncoding`", "`nn::SinusoidalPositionalEncoding`", module("SinusoidalPositionalEncoding")),
        X("Rotary positional encoding (no torch.nn class)", "`RotaryEncoding`", "`nn::RotaryEncoding`", module("RotaryEncoding")),
    ]),
    ("Linear, dropout, embedding", [
        E(N + "Linear", "`Linear`", "`nn::Linear`", module("Linear")),
        E(N + "Bilinear", None, "`nn::Bilinear`", module("Bilinear")),
        E(N + "Dropout", "`Dropout`", "`nn::Dropout`", module("Dropout")),
        E(N + "Dropout2d", None, "`nn::Dropout2d`", module("Dropout2d")),
        E(N + "AlphaDropout", None, "`nn::AlphaDropout`", module("AlphaDropout")),
        E(N + "Embedding", "`Embedding`", "`nn::Embedding`", module("Embedding")),
        E(N + "EmbeddingBag", None, "`nn::EmbeddingBag`", module("EmbeddingBag")),
    ]),
    ("Distance", [
        E(N + "CosineSimilarity", "`CosineSimilarity`", "`nn::CosineSimilarity`", module("CosineSimilarity")),
        E(N + "PairwiseDistance", "`PairwiseDistance`", "`nn::PairwiseDistance`", module("PairwiseDistance")),
    ]),
    ("Vision", [
        E(N + "PixelShuffle", "`PixelShuffle`", "`nn::PixelShuffle` / `functional::pixel_shuffle`", module("PixelShuffle") + "|" + decl("pixel_shuffle")),
        E(N + "PixelUnshuffle", None, "`nn::PixelUnshuffle` / `functional::pixel_unshuffle`", module("PixelUnshuffle") + "|" + decl("pixel_unshuffle")),
        E(N + "Upsample", "`Interpolate1d` / `Interpolate2d`", "`nn::Upsample`", module("Upsample")),
        E(N + "ChannelShuffle", None, "`nn::ChannelShuffle`", module("ChannelShuffle")),
    ]),
    ("torch.nn.functional (the ops without a module)", [
        E(F + "conv1d / conv2d", "`module::conv1d` / `conv2d`", "`functional::conv1d` / `conv2d`", decl("conv2d")),
        E(F + "conv3d", "`module::conv3d`", "`functional::conv3d`", decl("conv3d")),
        E(F + "conv_transpose1d / conv_transpose2d", "`module::conv_transpose1d` / `conv_transpose2d`", "`functional::conv_transpose1d` / `conv_transpose2d`", decl("conv_transpose2d")),
        E(F + "conv_transpose3d", "`module::conv_transpose3d`", "`functional::conv_transpose3d`", decl("conv_transpose3d")),
        E(F + "max_pool1d / max_pool2d", "`module::max_pool1d` / `max_pool2d`", "`functional::max_pool1d` / `max_pool2d` (`_with_indices`)", decl("max_pool2d")),
        E(F + "max_pool3d", None, "`functional::max_pool3d`", decl("max_pool3d")),
        E(F + "avg_pool1d / avg_pool2d", "`module::avg_pool1d` / `avg_pool2d`", "`functional::avg_pool1d` / `avg_pool2d`", decl("avg_pool2d")),
        E(F + "avg_pool3d", None, "`functional::avg_pool3d`", decl("avg_pool3d")),
        E(F + "adaptive_avg_pool1d / adaptive_avg_pool2d", "`module::adaptive_avg_pool1d` / `adaptive_avg_pool2d`", "`functional::adaptive_avg_pool1d` / `adaptive_avg_pool2d`", decl("adaptive_avg_pool2d")),
        E(F + "adaptive_max_pool1d / adaptive_max_pool2d", None, "`functional::adaptive_max_pool2d`", decl("adaptive_max_pool1d", "adaptive_max_pool2d")),
        E(F + "max_unpool2d", None, "`functional::max_unpool2d`", decl("max_unpool2d")),
        E(F + "interpolate", "`module::interpolate`", "`functional::interpolate`", decl("interpolate")),
        E(F + "grid_sample", f"`{T}grid_sample_2d`", "`functional::grid_sample`", decl("grid_sample")),
        E(F + "affine_grid", None, "`functional::affine_grid`", decl("affine_grid")),
        E(F + "scaled_dot_product_attention", None, "`functional::scaled_dot_product_attention`", decl("scaled_dot_product_attention")),
        E(F + "linear", "`module::linear`", "`functional::linear`", decl("linear")),
        E(F + "softmax / log_softmax", "`activation::softmax` / `log_softmax`", "`t.softmax(d)` / `log_softmax(d)`", decl("softmax")),
        E(F + "normalize", None, "`functional::normalize`", fdecl("normalize")),
        E(F + "cosine_similarity", "`linalg::cosine_similarity` (burn-linalg)", "`functional::cosine_similarity`", fdecl("cosine_similarity")),
        E(F + "pairwise_distance", None, "`functional::pairwise_distance`", fdecl("pairwise_distance")),
        E(F + "dropout", None, "`functional::dropout`", fdecl("dropout")),
    ]),
]


LOSSES = [
    ("Losses", [
        E(N + "L1Loss", "`LpLoss` (`LpLossConfig::l1()`)", "`nn::l1_loss`", decl("l1_loss")),
        E(N + "MSELoss", "`MseLoss`", "`nn::mse_loss`", decl("mse_loss")),
        E(N + "HuberLoss", "`HuberLoss`", "`nn::huber_loss`", decl("huber_loss")),
        E(N + "SmoothL1Loss", "`SmoothL1Loss`", "`nn::smooth_l1_loss`", decl("smooth_l1_loss")),
        E(N + "CrossEntropyLoss", "`CrossEntropyLoss`", "`nn::cross_entropy`", decl("cross_entropy")),
        E(N + "NLLLoss", None, "`nn::nll_loss`", decl("nll_loss")),
        E(N + "BCELoss", "`BinaryCrossEntropyLoss`", "`nn::binary_cross_entropy`", decl("binary_cross_entropy")),
        E(N + "BCEWithLogitsLoss", "`BinaryCrossEntropyLoss` (logits)", "`nn::binary_cross_entropy_with_logits`", decl("binary_cross_entropy_with_logits")),
        E(N + "KLDivLoss", "`KLDivLoss`", "`nn::kl_div`", decl("kl_div")),
        E(N + "PoissonNLLLoss", "Poisson NLL (`loss::poisson`)", "`nn::poisson_nll_loss`", decl("poisson_nll_loss")),
        E(N + "GaussianNLLLoss", "`GaussianNLLLoss`", "`nn::gaussian_nll_loss`", decl("gaussian_nll_loss")),
        E(N + "CTCLoss", "`CTCLoss`", "`nn::ctc_loss`", decl("ctc_loss")),
        E(N + "CosineEmbeddingLoss", "`CosineEmbeddingLoss`", "`nn::cosine_embedding_loss`", decl("cosine_embedding_loss")),
        E(N + "HingeEmbeddingLoss", "`HingeEmbeddingLoss`", "`nn::hinge_embedding_loss`", decl("hinge_embedding_loss")),
        E(N + "MarginRankingLoss", "`MarginRankingLoss`", "`nn::margin_ranking_loss`", decl("margin_ranking_loss")),
        E(N + "SoftMarginLoss", "soft margin (`loss::soft_margin`)", "`nn::soft_margin_loss`", decl("soft_margin_loss")),
        E(N + "MultiMarginLoss", "`MultiMarginLoss`", "`nn::multi_margin_loss`", decl("multi_margin_loss")),
        E(N + "MultiLabelMarginLoss", None, "`nn::multilabel_margin_loss`", decl("multilabel_margin_loss")),
        E(N + "MultiLabelSoftMarginLoss", None, "`nn::multilabel_soft_margin_loss`", decl("multilabel_soft_margin_loss")),
        E(N + "TripletMarginLoss", "`TripletMarginLoss`", "`nn::triplet_margin_loss`", decl("triplet_margin_loss")),
        E(N + "TripletMarginWithDistanceLoss", None, "`nn::triplet_margin_with_distance_loss`", decl("triplet_margin_with_distance_loss")),
        E("torchvision.ops.sigmoid_focal_loss", None, "`nn::sigmoid_focal_loss`", decl("sigmoid_focal_loss")),
    ]),
]

O = "torch.optim."

OPTIMIZERS = [
    ("Optimizers", [
        E(O + "SGD", "`Sgd`", "`optim::Sgd`", module("SgdRule")),
        E(O + "Adam", "`Adam`", "`optim::Adam`", module("AdamRule")),
        E(O + "AdamW", "`AdamW`", "`optim::adamw(...)`", decl("adamw")),
        E(O + "Adagrad", "`AdaGrad`", "`optim::AdaGrad`", module("AdaGradRule")),
        E(O + "Adadelta", None, "`optim::Adadelta`", module("AdadeltaRule")),
        E(O + "Adamax", None, "`optim::Adamax`", module("AdamaxRule")),
        E(O + "NAdam", None, "`optim::NAdam`", module("NAdamRule")),
        E(O + "RAdam", None, "`optim::RAdam`", module("RAdamRule")),
        E(O + "RMSprop", "`RmsProp`", "`optim::RmsProp`", module("RmsPropRule")),
        E(O + "Rprop", None, "`optim::Rprop`", module("RpropRule")),
        E(O + "ASGD", None, "`optim::Asgd`", module("AsgdRule")),
        E(O + "LBFGS", "L-BFGS (`lbfgs`)", "`optim::Lbfgs`", module("LbfgsOptimizer")),
        E(O + "Adafactor", "Adafactor", "`optim::Adafactor`", module("AdafactorRule", "Adafactor")),
        E(O + "Muon", "`Muon`", "`optim::Muon`", module("MuonRule")),
        E(O + "SparseAdam", None, "`optim::SparseAdam`", module("SparseAdamRule", "SparseAdam")),
        X("Lion (not in torch.optim)", "Lion", "`optim::Lion`", module("LionRule")),
        X("Adan (not in torch.optim)", "`Adan`", "`optim::Adan`", module("AdanRule")),
        X("LAMB (not in torch.optim)", "LAMB", "`optim::Lamb`", module("LambRule")),
    ]),
    ("Gradient utilities (torch.nn.utils)", [
        E("torch.nn.utils.clip_grad_norm_", "gradient clipping by norm (`grad_clipping`)", "`optim::clip_grad_norm(grads, max_norm)`", decl("clip_grad_norm")),
        E("torch.nn.utils.clip_grad_value_", "gradient clipping by value (`grad_clipping`)", "`optim::clip_grad_value(grads, clip)`", decl("clip_grad_value")),
    ]),
]

S = "torch.optim.lr_scheduler."

SCHEDULERS = [
    ("Learning-rate schedulers", [
        E(S + "StepLR", "`StepLrScheduler`", "`optim::StepLR`", module("StepLR")),
        E(S + "MultiStepLR", None, "`optim::MultiStepLR`", module("MultiStepLR")),
        E(S + "ConstantLR", None, "`optim::ConstantLR`", module("ConstantLR")),
        E(S + "LinearLR", "`LinearLrScheduler`", "`optim::LinearLR`", module("LinearLR")),
        E(S + "ExponentialLR", "`ExponentialLrScheduler`", "`optim::ExponentialLR`", module("ExponentialLR")),
        E(S + "PolynomialLR", None, "`optim::PolynomialLR`", module("PolynomialLR")),
        E(S + "CosineAnnealingLR", "`CosineAnnealingLrScheduler`", "`optim::CosineAnnealingLR`", module("CosineAnnealingLR")),
        E(S + "CosineAnnealingWarmRestarts", None, "`optim::CosineAnnealingWarmRestarts`", module("CosineAnnealingWarmRestarts")),
        E(S + "CyclicLR", None, "`optim::CyclicLR`", module("CyclicLR")),
        E(S + "OneCycleLR", None, "`optim::OneCycleLR`", module("OneCycleLR")),
        E(S + "LambdaLR", None, "`optim::LambdaLR`", module("LambdaLR")),
        E(S + "MultiplicativeLR", None, "`optim::MultiplicativeLR`", module("MultiplicativeLR")),
        E(S + "SequentialLR", "`SequentialLrScheduler`", "`optim::SequentialLR`", module("SequentialLR")),
        E(S + "ChainedScheduler", "`ComposedLrScheduler` (product)", "`optim::ChainedScheduler`", module("ChainedScheduler")),
        E(S + "ReduceLROnPlateau", None, "`optim::ReduceLROnPlateau`", module("ReduceLROnPlateau")),
        X("Noam (transformer warm-up; not in torch)", "`NoamLrScheduler`", "`optim::NoamLR`", module("NoamLR")),
    ]),
]

TM = "torchmetrics."

METRICS = [
    ("Classification", [
        E(TM + "Accuracy", "`AccuracyMetric`", "`train::AccuracyMetric`", module("AccuracyMetric")),
        E(TM + "Accuracy(top_k=k)", "`TopKAccuracyMetric`", "`train::TopKAccuracyMetric`", module("TopKAccuracyMetric")),
        E(TM + "Precision", "`PrecisionMetric`", "`train::precision_metric(Average)`", decl("precision_metric")),
        E(TM + "Recall", "`RecallMetric`", "`train::recall_metric(Average)`", decl("recall_metric")),
        E(TM + "FBetaScore / F1Score", "`FBetaScoreMetric`", "`train::fbeta_metric(beta, Average)`", decl("fbeta_metric")),
        E(TM + "ConfusionMatrix", None, "`train::ConfusionMatrix`", module("ConfusionMatrix")),
        E(TM + "AUROC", "`AurocMetric`", "`train::auroc_metric()` / `auroc(...)`", decl("auroc_metric")),
        E(TM + "AveragePrecision", None, "`train::average_precision_metric()`", decl("average_precision_metric")),
        E(TM + "HammingDistance", "`HammingScore`", "`train::HammingLossMetric` / `hamming_loss(...)`", module("HammingLossMetric")),
        E(TM + "MatthewsCorrCoef", None, "`train::mcc_metric()`", decl("mcc_metric", "matthews_corrcoef")),
        E(TM + "CohenKappa", None, "`train::cohen_kappa(...)`", decl("cohen_kappa")),
    ]),
    ("Regression", [
        E(TM + "MeanAbsoluteError", None, "`train::mae_metric()`", decl("mae_metric")),
        E(TM + "MeanSquaredError", None, "`train::mse_metric()`", decl("mse_metric")),
        E(TM + "MeanSquaredError(squared=False)", None, "`train::rmse_metric()`", decl("rmse_metric")),
        E(TM + "R2Score", None, "`train::r2_metric()`", decl("r2_metric")),
    ]),
    ("Text", [
        E(TM + "text.Perplexity", "`PerplexityMetric`", "`train::PerplexityMetric`", module("PerplexityMetric")),
        E(TM + "text.CharErrorRate", "`CharErrorRate`", "`train::char_error_rate(...)` (`ErrorRateMetric`)", decl("char_error_rate")),
        E(TM + "text.WordErrorRate", "`WordErrorRate`", "`train::word_error_rate(...)` (`ErrorRateMetric`)", decl("word_error_rate")),
        E(TM + "text.BLEUScore", "BLEU metric", "`train::bleu(...)`", decl("bleu", "bleu_score")),
    ]),
    ("Image", [
        E(TM + "image.PeakSignalNoiseRatio", "PSNR metric (`vision`)", "`train::PsnrMetric` / `psnr(...)`", module("PsnrMetric")),
        E(TM + "image.StructuralSimilarityIndexMeasure", "SSIM metric (`vision`)", "`train::SsimMetric` / `ssim(...)`", module("SsimMetric")),
        E(TM + "image.MultiScaleStructuralSimilarityIndexMeasure", "MS-SSIM metric (`vision`)", "`train::ms_ssim(...)`", decl("ms_ssim")),
        E(TM + "image.FrechetInceptionDistance", "FID metric (`vision`)", "`train::fid(...)`", decl("fid")),
        E(TM + "segmentation.DiceScore", "Dice metric (`vision`)", "`train::dice(...)`", decl("dice")),
    ]),
    ("Training loop", [
        E(TM + "aggregation.MeanMetric (of the loss)", "`LossMetric`", "`train::LossMetric`", module("LossMetric")),
        X("learning rate (no torchmetrics class)", "`LearningRateMetric`", "`train::LearningRateMetric`", module("LearningRateMetric")),
        X("CPU / memory use (no torchmetrics class)", "CPU and memory use metrics (`sys-metrics`)", "`train::CpuMetric` / `MemoryMetric`", module("CpuMetric")),
        X("throughput (no torchmetrics class)", None, "`train::ThroughputMetric`", module("ThroughputMetric")),
    ]),
]

# Where each category's Kiln names are looked for: the user-facing headers (the tensor
# methods and kiln::functional, nn, optim, train) and, for metrics, src/train. Backend,
# autodiff, codegen and ONNX internals are left out: a primitive or an ONNX op of the same
# name is not an op a user can call.
TENSOR_API = ["include/kiln/tensor"]
NN_API = ["include/kiln/nn", "include/kiln/tensor", "include/kiln/ops/nn.hpp"]
CATEGORIES = [
    ("Tensor ops", TENSOR_API, TENSOR_OPS),
    ("Modules (torch.nn)", NN_API, MODULES),
    ("Losses (torch.nn)", ["include/kiln/nn"], LOSSES),
    ("Optimizers (torch.optim)", ["include/kiln/optim"], OPTIMIZERS),
    ("Learning-rate schedulers (torch.optim.lr_scheduler)", ["include/kiln/optim"], SCHEDULERS),
    ("Training metrics (torchmetrics)", ["include/kiln/train", "src/train"], METRICS),
]


# ---- reading the code

_TOKENS = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|//[^\n]*|/\*.*?\*/', re.S)


def _blank(match: re.Match) -> str:
    text = match.group(0)
    if text.startswith('"'):
        return '""'
    if text.startswith("'"):
        return "''"
    return " " + "\n" * text.count("\n")  # a comment: keep the line count


def strip_comments_and_strings(source: str) -> str:
    return _TOKENS.sub(_blank, source)


def load_sources(roots: list[str]) -> dict[str, str]:
    files = {}
    for root in roots:
        base = ROOT / root
        for path in [base] if base.is_file() else sorted(base.rglob("*")):
            if path.suffix not in {".hpp", ".cpp", ".h"} or not path.is_file():
                continue
            rel = path.relative_to(ROOT).as_posix()
            files[rel] = strip_comments_and_strings(path.read_text(encoding="utf-8"))
    return files


def kiln_has(row: dict, files: dict[str, str]) -> bool:
    pattern = re.compile(row["pattern"])
    for rel, text in files.items():
        if row["files"] and not any(part in rel for part in row["files"]):
            continue
        if pattern.search(text):
            return True
    return False


# ---- writing the page

INTRO = f"""# Coverage against torch and Burn

What Kiln has, for each PyTorch op, module, loss, optimizer, scheduler and metric a PyTorch
user commonly reaches for, next to what Burn {BURN_RELEASE} has.

- **torch**: a curated list of `torch`, `torch.nn`, `torch.optim` and `torchmetrics` names
  (rows marked *beyond torch* are things Kiln or Burn have that torch has no class for; they
  are not counted).
- **Burn**: the Burn name where it was found in Burn {BURN_RELEASE} (the module lists of the
  burn-nn, burn-optim and burn-train {BURN_RELEASE} sources, burn-linalg's functions, and
  burn-tensor's `Tensor` methods in the tracel-ai/burn sources). A name in parentheses
  (`loss::poisson`) is the Burn module where the exact type name was not confirmed. "—"
  means it was not found, not that Burn has no way to compute it.
- **Kiln**: read from the code. A row is ✓ when its pattern matches a declaration in Kiln's
  user-facing headers (`include/kiln/tensor`, `nn`, `optim`, `train`; for metrics `src/train`
  too), "—" otherwise. Comments, string literals and the backend, autodiff, codegen and ONNX
  internals are left out.

This page is generated by `scripts/coverage.py`; do not edit it by hand. After adding an op
or a module, regenerate it with `python3 scripts/coverage.py`; `python3 scripts/coverage.py
--check` fails while the page is out of date. The torch and Burn columns are the lists at the
top of the script: extend them there.
"""


def cell(text: str) -> str:
    return text.replace("|", "\\|")


def render() -> str:
    out = [INTRO]
    summary = []
    body = []
    for title, roots, sections in CATEGORIES:
        files = load_sources(roots)
        total = have = burn = 0
        body.append(f"## {title}\n")
        for section, rows in sections:
            if len(sections) > 1:
                body.append(f"### {section}\n")
            body.append("| torch | Burn | Kiln |")
            body.append("|---|---|---|")
            for row in rows:
                present = kiln_has(row, files)
                if row["torch"] is None:
                    torch_cell = f"*beyond torch:* {row['label']}"
                else:
                    torch_cell = f"`{row['torch']}`"
                    total += 1
                    have += present
                    burn += row["burn"] is not None
                burn_cell = row["burn"] or "—"
                kiln_cell = f"✓ {row['kiln']}" if present else "—"
                body.append(f"| {cell(torch_cell)} | {cell(burn_cell)} | {cell(kiln_cell)} |")
            body.append("")
        line = f"Kiln has {have} of {total} torch entries (Burn {BURN_RELEASE}: {burn} of {total})."
        body.append(f"**{line}**\n")
        summary.append(f"| {title} | {have} / {total} | {burn} / {total} |")
    out.append("## Summary\n")
    out.append(f"| category | Kiln | Burn {BURN_RELEASE} |")
    out.append("|---|---|---|")
    out.extend(summary)
    out.append("")
    out.extend(body)
    return "\n".join(out).rstrip("\n") + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 (printing a diff) if docs/coverage.md is not what this script writes")
    args = parser.parse_args()
    page = render()
    if args.check:
        current = PAGE.read_text(encoding="utf-8") if PAGE.exists() else ""
        if current == page:
            return 0
        sys.stdout.writelines(difflib.unified_diff(
            current.splitlines(keepends=True), page.splitlines(keepends=True),
            "docs/coverage.md (on disk)", "docs/coverage.md (generated)"))
        print("docs/coverage.md is out of date: run python3 scripts/coverage.py", file=sys.stderr)
        return 1
    PAGE.write_text(page, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
