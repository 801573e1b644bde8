"""From the IR to an ONNX file.

* :mod:`~oxport.serialize.proto`: names, value infos and nodes, the ``ModelProto``
  without weight bytes (:func:`serialize`, which returns a :class:`Serialized`).
* :mod:`~oxport.serialize.weights`: tensor bytes, streamed from tensor memory once,
  inline or as external data beside the model.
* :mod:`~oxport.serialize.streamed`: weights that stay in a checkpoint until written (a
  meta-device model's, ``weights=``), the export's folds recorded on each.
* :mod:`~oxport.serialize.direct`: large external data written past the page cache
  (``O_DIRECT``, whole aligned blocks).
* :mod:`~oxport.serialize.atomic`: the write to a path (temporary files renamed into
  place, the model last, journaled) or to a file object (:func:`write`).
* :mod:`~oxport.serialize.check`: the ONNX checker on a weightless copy, and errors
  traced back to the node that made them (:func:`check`, :func:`blame`).

The names below are what the rest of oxport calls; the graph passes that build protos of
their own use :mod:`~oxport.serialize.proto`'s :class:`~oxport.serialize.proto.Namer` and
builders directly.
"""

from oxport.serialize import streamed
from oxport.serialize.atomic import check_target, write
from oxport.serialize.check import blame, check, named_node
from oxport.serialize.proto import Serialized, clean_name, inferred_outputs, ir_version, serialize
from oxport.serialize.weights import (
    LazyTensor,
    Weight,
    raw_bytes,
    tensor_header,
    tensor_proto,
    to_bytes,
)

__all__ = [
    "LazyTensor", "Serialized", "Weight", "blame", "check", "check_target", "clean_name",
    "inferred_outputs", "ir_version", "named_node", "raw_bytes", "serialize", "streamed",
    "tensor_header", "tensor_proto", "to_bytes", "write",
]
