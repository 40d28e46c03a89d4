"""Scalar bodies of loop kernels: each graph op's arithmetic on one element (scalar_ops), and
the integer and unsigned forms arith lacks or spells apart (integer_ops)."""
