"""PyTorch-saved weights that Kiln modules load (tests/nn/state_test.cpp): a ResNet basic
block (conv-bn-relu-conv-bn plus a 1x1 projection shortcut, then relu) trained for a few
steps so its BatchNorm running statistics are not the defaults, saved with torch.save to
tests/golden/import/resnet_block.pt; the golden case holds an input and the block's output
in eval mode. And a torch.nn.TransformerEncoderLayer (batch_first, dropout 0, parameters
moved off their initial values), saved to tests/golden/import/encoder_layer.pt in f32, with
its output for an input without and with a key padding mask; and a training checkpoint
holding that layer inside a bigger model, {"epoch": 3, "model": state_dict} with keys
model.encoder.layers.0.* and model.head.*, as tests/golden/import/checkpoint.pt (the
example of docs/import.md loads it)."""
import pathlib

import torch
import torch.nn as nn

HERE = pathlib.Path(__file__).resolve().parent


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + self.shortcut(x))


def cases(w):
    block = BasicBlock(3, 8, 2)
    opt = torch.optim.SGD(block.parameters(), lr=0.1)
    for _ in range(3):  # moves the weights and the running statistics off their defaults
        opt.zero_grad()
        block(torch.randn(4, 3, 8, 8)).square().mean().backward()
        opt.step()
    block.eval()
    torch.save(block.state_dict(), HERE / "import" / "resnet_block.pt")
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        w.case("resnet_block", x=x, y=block(x))
    encoder_layer_cases(w)


def encoder_layer_cases(w):
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True)
    with torch.no_grad():  # PyTorch starts the attention biases at zero and norms at one
        for p in layer.parameters():
            p.add_(torch.empty_like(p).uniform_(-0.2, 0.2))
    layer.eval()
    torch.save(layer.state_dict(), HERE / "import" / "encoder_layer.pt")
    x = torch.randn(2, 5, 8)
    pad = torch.zeros(2, 5, dtype=torch.bool)
    pad[1, 3:] = True
    model = nn.Module()
    model.encoder = nn.TransformerEncoder(layer, 1)  # a copy of the layer: encoder.layers.0.*
    model.head = nn.Linear(8, 3)
    torch.save({"epoch": 3, "model": model.state_dict()}, HERE / "import" / "checkpoint.pt")
    # Autograd on, so that torch 1.13 takes its ordinary path rather than the fused inference one.
    w.case("encoder_layer", x=x, y=layer(x), padding=pad, y_padded=layer(x, src_key_padding_mask=pad))
