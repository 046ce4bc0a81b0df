"""Shared pytest settings. Imports no dynajit package, so each package's tests run with that package alone."""

import os

import torch

torch.manual_seed(0)
os.environ.setdefault("TRITON_INTERPRET", "1")
