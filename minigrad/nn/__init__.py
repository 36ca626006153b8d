"""minigrad.nn: layers made of minigrad ops, for the eager engine and for capture by minigrad.aot.

    layers.py       Module, Linear, Sequential, MLP and the activation modules
    transformer.py  the blocks of a tiny decoder-only transformer, built on layers.py
"""
from .layers import MLP, Linear, Module, ReLU, Sequential, Sigmoid, Tanh
from .transformer import (Attention, Embedding, MoE, RMSNorm, SwiGLU, TinyTransformer,
                          TransformerBlock, name_parameters)

__all__ = ["Module", "Linear", "Sequential", "MLP", "ReLU", "Tanh", "Sigmoid",
           "Embedding", "RMSNorm", "Attention", "SwiGLU", "MoE", "TransformerBlock",
           "TinyTransformer", "name_parameters"]
