"""numpy reference implementations of every ortquant op, written from the specs, independent of the C++.

One module per family: :mod:`ortquant.reference.qonnx`, :mod:`ortquant.reference.ngraph`.
"""
