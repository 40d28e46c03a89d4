"""ONNX recurrent operators (RNN, GRU, LSTM) unrolled over their static sequence length
into graph ops."""

from __future__ import annotations
