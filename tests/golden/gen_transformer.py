"""Golden transformer decoder and positional encodings (tests/nn/transformer_test.cpp), in f64.

Decoder cases come from torch.nn.TransformerDecoderLayer / TransformerDecoder (batch_first,
dropout 0, every parameter moved off its initial value so that biases and norm weights
matter): the state dict ("w.<name>"), tgt, memory, the masks, the output y, and for the loss
sum(y * r) the gradients of tgt ("dtgt"), memory ("dmemory") and each parameter ("d.<name>").

Positional encodings have no torch.nn module; they are computed here from their formulas:
the sinusoidal table of "Attention Is All You Need" and rotary embedding with the
rotate-half pairing (GPT-NeoX, Hugging Face's Llama), with the input gradient through autograd.
"""
import torch
import torch.nn as nn

f64 = torch.float64
# The configuration is repeated in tests/nn/transformer_test.cpp.
D_MODEL, NHEAD, FF, N, L, S = 8, 2, 16, 2, 3, 4


def perturbed(module):
    module = module.double()
    with torch.no_grad():
        for p in module.parameters():
            p.add_(torch.empty_like(p).uniform_(-0.2, 0.2))
    return module


def decoder_case(w, name, module, masks):
    before = {f"w.{k}": v.clone() for k, v in module.state_dict().items()}
    tgt = torch.randn(N, L, D_MODEL, dtype=f64, requires_grad=True)
    memory = torch.randn(N, S, D_MODEL, dtype=f64, requires_grad=True)
    y = module(tgt, memory, **masks)
    r = torch.randn(y.shape, dtype=f64)
    (y * r).sum().backward()
    tensors = dict(before)
    tensors.update(tgt=tgt.detach(), memory=memory.detach(), y=y.detach(), r=r, dtgt=tgt.grad, dmemory=memory.grad)
    for k, v in masks.items():
        tensors[k] = v
    for k, p in module.named_parameters():
        tensors[f"d.{k}"] = p.grad
    w.case(name, **tensors)


def causal(n):
    return torch.triu(torch.ones(n, n, dtype=torch.bool), 1)


def memory_padding():
    pad = torch.zeros(N, S, dtype=torch.bool)
    pad[0, 3] = True
    pad[1, 1] = True
    pad[1, 3] = True
    return pad


def decoder_cases(w):
    options = dict(dim_feedforward=FF, dropout=0.0, batch_first=True)
    post = perturbed(nn.TransformerDecoderLayer(D_MODEL, NHEAD, **options))
    decoder_case(w, "decoder_layer", post, dict(tgt_mask=causal(L), memory_key_padding_mask=memory_padding()))

    pre = perturbed(nn.TransformerDecoderLayer(D_MODEL, NHEAD, norm_first=True, activation="gelu", **options))
    tgt_pad = torch.zeros(N, L, dtype=torch.bool)
    tgt_pad[1, L - 1] = True  # with the causal mask every query still sees a key
    memory_mask = torch.zeros(L, S, dtype=torch.bool)
    memory_mask[2, 0] = True
    memory_mask[0, 2] = True
    decoder_case(w, "decoder_layer_pre_norm_gelu", pre,
                 dict(tgt_mask=causal(L), memory_mask=memory_mask, tgt_key_padding_mask=tgt_pad,
                      memory_key_padding_mask=memory_padding()))

    # TransformerDecoder deep-copies its layer; the perturbation makes the two layers differ.
    stack = nn.TransformerDecoder(nn.TransformerDecoderLayer(D_MODEL, NHEAD, **options), 2, norm=nn.LayerNorm(D_MODEL))
    decoder_case(w, "decoder_stack", perturbed(stack),
                 dict(tgt_mask=causal(L), memory_key_padding_mask=memory_padding()))


def sinusoidal_table(length, d, offset=0, base=10000.0):
    pos = torch.arange(offset, offset + length, dtype=f64)[:, None]
    col = torch.arange(d)
    freq = base ** (-(col - col % 2).to(f64) / d)
    angle = pos * freq[None, :]
    return torch.where(col % 2 == 0, torch.sin(angle), torch.cos(angle))


def sinusoidal_case(w, name, shape, offset=0, base=10000.0):
    x = torch.randn(*shape, dtype=f64, requires_grad=True)
    pe = sinusoidal_table(shape[1], shape[2], offset, base)
    y = x + pe
    r = torch.randn(y.shape, dtype=f64)
    (y * r).sum().backward()
    w.case(name, x=x.detach(), pe=pe, y=y.detach(), r=r, dx=x.grad)


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


def rotary_case(w, name, shape, offset=0, base=10000.0):
    x = torch.randn(*shape, dtype=f64, requires_grad=True)
    length, d = shape[-2], shape[-1]
    inv_freq = 1.0 / base ** (torch.arange(0, d, 2, dtype=f64) / d)
    angle = torch.arange(offset, offset + length, dtype=f64)[:, None] * inv_freq[None, :]
    angle = torch.cat([angle, angle], dim=-1)
    y = x * torch.cos(angle) + rotate_half(x) * torch.sin(angle)
    r = torch.randn(y.shape, dtype=f64)
    (y * r).sum().backward()
    w.case(name, x=x.detach(), y=y.detach(), r=r, dx=x.grad)


def cases(w):
    decoder_cases(w)
    sinusoidal_case(w, "sinusoidal", (2, 5, 6))
    sinusoidal_case(w, "sinusoidal_offset_odd", (1, 3, 5), offset=4, base=100.0)
    rotary_case(w, "rotary", (2, 2, 5, 8))
    rotary_case(w, "rotary_offset_base", (3, 2, 6), offset=7, base=500.0)
    transformer_case(w)


def transformer_case(w):
    """torch.nn.Transformer, 2 encoder and 1 decoder layers, pre-norm with gelu: the state dict,
    src [N, S, E], tgt [N, L, E], a causal tgt mask and a src padding mask (also on memory), the
    output and the gradients of sum(y * r)."""
    torch.manual_seed(21)
    module = perturbed(nn.Transformer(D_MODEL, NHEAD, 2, 1, FF, dropout=0.0, activation="gelu",
                                      batch_first=True, norm_first=True))
    before = {f"w.{k}": v.clone() for k, v in module.state_dict().items()}
    src = torch.randn(N, S, D_MODEL, dtype=f64, requires_grad=True)
    tgt = torch.randn(N, L, D_MODEL, dtype=f64, requires_grad=True)
    pad = memory_padding()
    y = module(src, tgt, tgt_mask=causal(L), src_key_padding_mask=pad, memory_key_padding_mask=pad)
    r = torch.randn(y.shape, dtype=f64)
    (y * r).sum().backward()
    tensors = dict(before)
    tensors.update(src=src.detach(), tgt=tgt.detach(), pad=pad, y=y.detach(), r=r, dsrc=src.grad, dtgt=tgt.grad)
    for k, p in module.named_parameters():
        tensors[f"d.{k}"] = p.grad
    w.case("transformer", **tensors)
