"""Golden layers from torch.nn (tests/nn/layers_test.cpp): for each layer, its parameters
and buffers (state_dict names, prefixed "w."), an input x, the output y, and for the loss
sum(y * r) with a fixed random r: the gradient of x ("dx") and of each parameter ("d.<name>").
Layers with train/eval behaviour have a case per mode ("_eval"); training cases also
record the buffers after the step ("after.<name>")."""
import math

import torch
import torch.nn as nn

f64 = torch.float64


def layer_case(w, name, module, x, train=True):
    module = module.double()
    module.train(train)
    before = {f"w.{k}": v.clone() for k, v in module.state_dict().items()}
    x = (x.to(f64) if x.is_floating_point() else x).clone().requires_grad_(x.is_floating_point())
    y = module(x)
    r = torch.randn(y.shape, dtype=f64)
    (y * r).sum().backward()
    tensors = dict(before)
    tensors.update(x=x.detach(), y=y.detach(), r=r)
    if x.requires_grad:
        tensors["dx"] = x.grad
    for k, p in module.named_parameters():
        tensors[f"d.{k}"] = p.grad if p.grad is not None else torch.zeros_like(p)
    if train:
        for k, b in module.named_buffers():
            tensors[f"after.{k}"] = b.clone()
    w.case(name, **tensors)


def cases(w):
    randn = lambda *s: torch.randn(*s, dtype=f64)
    # The configurations are repeated in tests/nn/layers_test.cpp.
    layer_case(w, "linear", nn.Linear(5, 3), randn(4, 5))
    layer_case(w, "conv1d", nn.Conv1d(4, 6, 3, stride=2, padding=1, dilation=1, groups=2), randn(2, 4, 9))
    layer_case(w, "conv2d", nn.Conv2d(3, 4, (3, 2), stride=(2, 1), padding=(1, 0), dilation=(1, 2)), randn(2, 3, 7, 6))
    layer_case(w, "conv2d_groups", nn.Conv2d(4, 6, 3, padding=1, groups=2, bias=False), randn(1, 4, 5, 5))
    layer_case(w, "conv_transpose1d", nn.ConvTranspose1d(4, 3, 3, stride=2, padding=1, output_padding=1), randn(2, 4, 5))
    layer_case(w, "conv_transpose2d", nn.ConvTranspose2d(2, 4, (3, 2), stride=2, padding=(1, 0), groups=2), randn(2, 2, 4, 3))
    layer_case(w, "max_pool1d", nn.MaxPool1d(3, stride=2, padding=1), randn(2, 3, 9))
    layer_case(w, "max_pool2d", nn.MaxPool2d(2), randn(2, 3, 6, 5))
    layer_case(w, "avg_pool1d", nn.AvgPool1d(3, stride=2, padding=1), randn(2, 3, 9))
    layer_case(w, "avg_pool2d", nn.AvgPool2d((3, 2), stride=(2, 1), padding=(1, 0), count_include_pad=False), randn(2, 3, 7, 5))
    layer_case(w, "adaptive_avg_pool1d", nn.AdaptiveAvgPool1d(4), randn(2, 3, 10))
    layer_case(w, "adaptive_avg_pool2d", nn.AdaptiveAvgPool2d((3, 2)), randn(2, 3, 7, 5))
    for train in (True, False):
        suffix = "" if train else "_eval"
        bn1 = nn.BatchNorm1d(4, momentum=0.2)
        bn2 = nn.BatchNorm2d(3)
        with torch.no_grad():
            for bn in (bn1, bn2):
                bn.weight.uniform_(0.5, 1.5)
                bn.bias.uniform_(-0.5, 0.5)
                bn.running_mean.uniform_(-0.5, 0.5)
                bn.running_var.uniform_(0.5, 1.5)
        layer_case(w, "batch_norm1d" + suffix, bn1, randn(6, 4) * 2 + 1, train)
        layer_case(w, "batch_norm1d_3d" + suffix, nn.BatchNorm1d(4), randn(3, 4, 5), train)
        layer_case(w, "batch_norm2d" + suffix, bn2, randn(2, 3, 4, 5), train)
    ln = nn.LayerNorm((4, 5), eps=1e-4)
    with torch.no_grad():
        ln.weight.uniform_(0.5, 1.5)
        ln.bias.uniform_(-0.5, 0.5)
    layer_case(w, "layer_norm", ln, randn(2, 3, 4, 5))
    layer_case(w, "layer_norm_no_affine", nn.LayerNorm(6, elementwise_affine=False), randn(3, 6))
    gn = nn.GroupNorm(2, 6)
    with torch.no_grad():
        gn.weight.uniform_(0.5, 1.5)
        gn.bias.uniform_(-0.5, 0.5)
    layer_case(w, "group_norm", gn, randn(2, 6, 3, 4))
    layer_case(w, "instance_norm1d", nn.InstanceNorm1d(3, affine=True), randn(2, 3, 7))
    layer_case(w, "instance_norm2d", nn.InstanceNorm2d(3), randn(2, 3, 4, 5))
    emb = nn.Embedding(10, 4, padding_idx=2)
    layer_case(w, "embedding", emb, torch.tensor([[1, 2, 3], [9, 2, 1]]))
    prelu = nn.PReLU(3, init=0.1)
    layer_case(w, "prelu", prelu, randn(2, 3, 4))
    layer_case(w, "prelu_shared", nn.PReLU(), randn(5, 2))
    rms_case(w)
    attention_cases(w)
    bilinear_case(w)
    more_layer_cases(w)
    utility_layer_cases(w)


class RmsNorm(nn.Module):
    """RMS norm (not in torch 1.13): x / sqrt(mean(x^2 over the last dims) + eps) * weight."""

    def __init__(self, shape, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(shape) + 0.5)
        self.shape, self.eps = shape, eps

    def forward(self, x):
        dims = tuple(range(-len(self.shape), 0))
        return x * torch.rsqrt(x.pow(2).mean(dims, keepdim=True) + self.eps) * self.weight


def rms_case(w):
    layer_case(w, "rms_norm", RmsNorm((4,), 1e-6), torch.randn(3, 2, 4, dtype=f64))


class SelfAttention(nn.Module):
    """x -> MultiheadAttention(x, x, x) with a padded key in sample 1 and, optionally, a causal mask."""

    def __init__(self, causal):
        super().__init__()
        self.attn = nn.MultiheadAttention(8, 2, batch_first=True)
        self.causal = causal

    def forward(self, x):
        n, s, _ = x.shape
        pad = torch.zeros(n, s, dtype=torch.bool)
        pad[1, -1] = True
        mask = torch.triu(torch.ones(s, s, dtype=torch.bool), 1) if self.causal else None
        return self.attn(x, x, x, key_padding_mask=pad, attn_mask=mask, need_weights=False)[0]


def attention_cases(w):
    torch.manual_seed(5)
    attn = SelfAttention(False)
    with torch.no_grad():
        attn.attn.in_proj_bias.uniform_(-0.3, 0.3)
        attn.attn.out_proj.bias.uniform_(-0.3, 0.3)
    layer_case(w, "self_attention", attn, torch.randn(2, 5, 8, dtype=f64))
    layer_case(w, "self_attention_causal", SelfAttention(True), torch.randn(2, 5, 8, dtype=f64))
    layer_case(w, "encoder_layer", nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True),
               torch.randn(2, 5, 8, dtype=f64))
    layer_case(w, "encoder_layer_pre_norm_gelu",
               nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True, norm_first=True,
                                          activation="gelu"),
               torch.randn(2, 5, 8, dtype=f64))


class BilinearOfHalves(nn.Module):
    """x [N, 7] -> Bilinear(x[:, :3], x[:, 3:]), so the layer takes one input."""

    def __init__(self):
        super().__init__()
        self.bilinear = nn.Bilinear(3, 4, 5)

    def forward(self, x):
        return self.bilinear(x[:, :3], x[:, 3:])


def bilinear_case(w):
    torch.manual_seed(7)
    layer_case(w, "bilinear", BilinearOfHalves(), torch.randn(6, 7, dtype=f64))


class OfHalves(nn.Module):
    """x [2, ...] -> module(x[0], x[1]), so a two-input layer takes one input."""

    def __init__(self, module):
        super().__init__()
        self.module = module

    def forward(self, x):
        return self.module(x[0], x[1])


class BagsAt(nn.EmbeddingBag):
    """EmbeddingBag with fixed offsets (and per-sample weights), so it takes the indices alone."""

    def __init__(self, offsets, *args, per_sample_weights=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.offsets, self.per_sample_weights = offsets, per_sample_weights

    def forward(self, x):
        return super().forward(x, self.offsets, per_sample_weights=self.per_sample_weights)


def more_layer_cases(w):
    """Distances, local response norm, EmbeddingBag and adaptive max pooling (appended)."""
    torch.manual_seed(11)
    randn = lambda *s: torch.randn(*s, dtype=f64)
    layer_case(w, "cosine_similarity", OfHalves(nn.CosineSimilarity()), randn(2, 4, 6))
    layer_case(w, "cosine_similarity_last_dim", OfHalves(nn.CosineSimilarity(dim=-1, eps=1e-6)), randn(2, 3, 2, 5))
    layer_case(w, "pairwise_distance", OfHalves(nn.PairwiseDistance()), randn(2, 4, 6))
    layer_case(w, "pairwise_distance_p1", OfHalves(nn.PairwiseDistance(p=1.0, eps=1e-3)), randn(2, 4, 6))
    layer_case(w, "local_response_norm", nn.LocalResponseNorm(3, alpha=0.1, beta=0.75, k=2.0), randn(2, 5, 3, 4))
    layer_case(w, "local_response_norm_even", nn.LocalResponseNorm(2), randn(2, 5, 6) * 3)
    # Bag 1 is empty in each: zeros.
    weights = torch.tensor([0.5, 1.25, 0.75, 1.5, 2.0, 0.25, 1.0], dtype=f64)  # as in tests/nn/layers_test.cpp
    layer_case(w, "embedding_bag_sum", BagsAt(torch.tensor([0, 3, 3, 5]), 10, 4, mode="sum", per_sample_weights=weights),
               torch.tensor([1, 2, 4, 4, 9, 0, 3]))
    layer_case(w, "embedding_bag_mean_padding", BagsAt(torch.tensor([0, 2, 3, 6]), 10, 4, padding_idx=2),
               torch.tensor([2, 1, 2, 5, 7, 2, 3]))
    layer_case(w, "embedding_bag_max", BagsAt(torch.tensor([0, 2, 2, 6]), 10, 4, mode="max"),
               torch.tensor([1, 5, 3, 6, 0, 8, 2]))
    layer_case(w, "embedding_bag_2d", nn.EmbeddingBag(10, 4), torch.tensor([[1, 2, 3], [4, 4, 0]]))
    layer_case(w, "adaptive_max_pool1d", nn.AdaptiveMaxPool1d(4), randn(2, 3, 10))
    layer_case(w, "adaptive_max_pool2d", nn.AdaptiveMaxPool2d((3, 2)), randn(2, 3, 7, 5))
    layer_case(w, "adaptive_max_pool2d_unbatched", nn.AdaptiveMaxPool2d((2, 4)), randn(3, 5, 9))
    # Norms below eps: clamped in the value, the gradient x / eps (torch's clamp is outside the graph).
    small = randn(2, 3, 4)
    small[1, 0] *= 1e-4
    small[0, 2] *= 1e-4
    layer_case(w, "cosine_similarity_small_norms", OfHalves(nn.CosineSimilarity(dim=-1, eps=1e-3)), small)


class Lambda(nn.Module):
    def __init__(self, f):
        super().__init__()
        self.f = f

    def forward(self, x):
        return self.f(x)


class Unflattened(nn.Module):
    """Unflatten then flatten back in another place: both modules in one case."""

    def __init__(self):
        super().__init__()
        self.unflatten = nn.Unflatten(1, (3, -1))
        self.flatten = nn.Flatten(2)

    def forward(self, x):
        return self.flatten(self.unflatten(x).transpose(1, 2))


def utility_layer_cases(w):
    """Softplus, Softmax, LogSoftmax, Flatten / Unflatten, the padding layers and
    ChannelShuffle (appended)."""
    torch.manual_seed(12)
    randn = lambda *s: torch.randn(*s, dtype=f64)
    layer_case(w, "softplus", nn.Softplus(beta=2.0, threshold=3.0), randn(3, 7) * 2)
    layer_case(w, "softmax", nn.Softmax(dim=1), randn(2, 5, 3))
    layer_case(w, "log_softmax", nn.LogSoftmax(dim=-1), randn(2, 5, 3))
    layer_case(w, "flatten", nn.Flatten(), randn(2, 3, 4, 5))
    layer_case(w, "unflatten", Unflattened(), randn(2, 12, 5))
    layer_case(w, "zero_pad2d", nn.ZeroPad2d((1, 2, 0, 3)), randn(2, 3, 4, 5))
    layer_case(w, "constant_pad1d", nn.ConstantPad1d((2, 1), 0.5), randn(2, 3, 4))
    layer_case(w, "reflection_pad2d", nn.ReflectionPad2d((2, 1, 3, 0)), randn(1, 2, 4, 5))
    layer_case(w, "replication_pad1d", nn.ReplicationPad1d((3, 2)), randn(2, 3, 4))
    # torch 1.13's ChannelShuffle has no backward: the case runs its permutation written out,
    # checked here against the module.
    x = randn(2, 6, 2, 3)
    shuffled = lambda t: t.reshape(2, 3, 2, 2, 3).transpose(1, 2).reshape(2, 6, 2, 3)
    assert torch.equal(shuffled(x), nn.ChannelShuffle(3)(x))
    layer_case(w, "channel_shuffle", Lambda(shuffled), x)
    layer_case(w, "batch_norm3d", nn.BatchNorm3d(3, momentum=0.2), randn(2, 3, 2, 3, 4))
