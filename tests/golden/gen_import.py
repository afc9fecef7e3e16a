"""PyTorch-saved weights that Kiln modules load (tests/nn/state_test.cpp): a ResNet basic
block (conv-bn-relu-conv-bn plus a 1x1 projection shortcut, then relu) trained for a few
steps so its BatchNorm running statistics are not the defaults, saved with torch.save to
tests/golden/import/resnet_block.pt; the golden case holds an input and the block's output
in eval mode."""
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
