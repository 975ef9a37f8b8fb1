"""Typed messages: a ctypes structure sent with the type tag of Rust's
``zcio::typed`` and read back checked (tag, size, ``c_bool`` fields).

The tag is written and checked by the extension module, with the same Rust
code as the C library's ``zcio_send_typed`` / ``zcio_msg_read_typed``, so a
message tagged by Rust, C or Python reads the same everywhere.
"""

from __future__ import annotations

import ctypes
from typing import Any, Optional, Tuple, Type, TypeVar, Union

from ._errors import MalformedMessage
from ._zcio import _typed_check, _typed_header

T = TypeVar("T")

Tag = Union[None, str, Tuple[str, int]]

_TAG_LEN = 128
_POINTERS = (ctypes._Pointer, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_wchar_p)  # type: ignore[attr-defined]


def _refuse_pointers(cls: type) -> None:
    if isinstance(cls, type) and issubclass(cls, _POINTERS):
        raise TypeError(f"{cls.__name__} holds a pointer into this process: it cannot be sent")
    if isinstance(cls, type) and issubclass(cls, ctypes.Array):
        _refuse_pointers(cls._type_)  # type: ignore[attr-defined]
    for f in getattr(cls, "_fields_", ()):
        _refuse_pointers(f[1])


def _describe(cls: type, tag: Tag) -> tuple:
    if not (isinstance(cls, type) and hasattr(cls, "from_buffer_copy")):
        raise TypeError(f"{cls!r} is not a ctypes type")
    _refuse_pointers(cls)
    if tag is None:
        name, schema = None, 0
    elif isinstance(tag, str):
        name, schema = tag, 0
    else:
        name, schema = tag
    return (name, int(schema), ctypes.sizeof(cls), ctypes.alignment(cls), 0)


def _check_bools(cls: type, data: bytes, off: int) -> None:
    """Every c_bool of ``cls`` at ``data[off:]`` is 0 or 1 (as Rust's
    ``read_typed`` checks ``bool``)."""
    if cls is ctypes.c_bool:
        if data[off] > 1:
            raise MalformedMessage(
                f"the message's bytes are not a valid value: a c_bool at byte {off} is "
                f"{data[off]} (not 0 or 1): the sender is buggy or hostile; the message was not used"
            )
        return
    if isinstance(cls, type) and issubclass(cls, ctypes.Array):
        et = cls._type_  # type: ignore[attr-defined]
        es = ctypes.sizeof(et)
        for i in range(cls._length_):  # type: ignore[attr-defined]
            _check_bools(et, data, off + i * es)
        return
    for f in getattr(cls, "_fields_", ()):
        if len(f) > 2:  # a bit field: not a whole byte
            continue
        _check_bools(f[1], data, off + getattr(cls, f[0]).offset)


def send_typed(ch: Any, value: Any, tag: Tag = None, timeout: Optional[float] = None, pool: Any = None) -> None:
    """Send a ctypes value (a ``ctypes.Structure``, array or scalar) as a typed
    message: the type tag ``tag`` — ``(name, schema)`` as Rust's
    ``Tag::new(name, schema)``, a name (schema 0), or None for none — then
    the value's bytes, copied into a pool buffer (``ch.send``). A Rust
    receiver reads it with ``msg.read_typed::<T>(Some(&tag))`` when ``T``
    has the same layout. The structure must have no padding (add explicit
    reserved fields): every byte is sent."""
    cls = type(value)
    head = _typed_header(*_describe(cls, tag))
    ch.send(head + bytes(value), timeout=timeout, pool=pool)


def read_typed(msg: Any, cls: Type[T], tag: Tag = None) -> T:
    """Read a typed message as a new ``cls`` instance: the bytes are copied
    once (``msg.tobytes()``), then only the copy is checked — the type tag
    against ``tag`` and ``cls``'s size and alignment (name, schema, size,
    alignment), the payload's size, and every ``c_bool`` field (0 or 1) — and
    becomes the value. Raises ``MalformedMessage`` (a missing, corrupt or
    other tag, a wrong size, an invalid bool); other fields (enums kept as
    integers, indexes) are yours to validate."""
    desc = _describe(cls, tag)
    data = msg.tobytes()
    off, n = _typed_check(data[:_TAG_LEN], len(data), *desc)
    _check_bools(cls, data, off)
    return cls.from_buffer_copy(data, off)  # type: ignore[attr-defined]


def _describe_elems(head_cls: Optional[type], elem_cls: type, tag: Tag) -> tuple:
    """The layout of ``head_cls`` (or nothing) followed by a slice of
    ``elem_cls``: Rust's ``[E]`` or a ``#[repr(C)]`` type ending in ``[E]``."""
    name, schema, esize, ealign, _ = _describe(elem_cls, tag)
    if esize == 0:
        raise TypeError(f"{elem_cls.__name__} has no bytes: its count could not be known")
    size, align = 0, ealign
    if head_cls is not None:
        _, _, size, halign, _ = _describe(head_cls, tag)
        align = max(align, halign)
    return (name, schema, size, align, esize)


def send_typed_elems(
    ch: Any,
    head: Any,
    elems: Any,
    tag: Tag = None,
    timeout: Optional[float] = None,
    pool: Any = None,
) -> None:
    """Send a value of a type ending in a slice — what Rust's
    ``Pool::alloc_typed_elems`` fills: the ctypes value ``head`` (or None for
    a bare slice, Rust's ``[E]``) followed by ``elems``, a ctypes array
    (``E * n``), as one typed message with the tag ``tag`` (as
    ``send_typed``). A Rust receiver reads it with ``read_typed_vec::<E>`` or
    ``borrow_typed_elems``; the element size must be a multiple of the
    alignment (no padding at any length), as in Rust and C."""
    if not (isinstance(elems, ctypes.Array)):
        raise TypeError("elems must be a ctypes array (E * n)")
    elem_cls = elems._type_  # type: ignore[attr-defined]
    head_cls = None if head is None else type(head)
    head_bytes = b"" if head is None else bytes(head)
    desc = _describe_elems(head_cls, elem_cls, tag)
    ch.send(_typed_header(*desc) + head_bytes + bytes(elems), timeout=timeout, pool=pool)


def read_typed_elems(msg: Any, head_cls: Optional[type], elem_cls: type, tag: Tag = None) -> Tuple[Any, Any]:
    """Read a typed message of a type ending in a slice as ``(head,
    elems)``: a new ``head_cls`` value (None when ``head_cls`` is None) and a
    new ctypes array ``elem_cls * n``, n following from the length. Copied
    once and checked as ``read_typed`` checks (tag, sizes, ``c_bool``s of
    the head and of every element)."""
    desc = _describe_elems(head_cls, elem_cls, tag)
    data = msg.tobytes()
    off, n = _typed_check(data[:_TAG_LEN], len(data), *desc)
    size, esize = desc[2], desc[4]
    count = (n - size) // esize
    head = None
    if head_cls is not None:
        _check_bools(head_cls, data, off)
        head = head_cls.from_buffer_copy(data, off)  # type: ignore[attr-defined]
    arr_cls = elem_cls * count
    _check_bools(arr_cls, data, off + size)
    return head, arr_cls.from_buffer_copy(data, off + size)  # type: ignore[attr-defined]


def read_typed_vec(msg: Any, elem_cls: type, tag: Tag = None) -> Any:
    """Read a typed message of elements (Rust's ``Msg::read_typed_vec``: a
    ``[E]``) as a new ctypes array ``elem_cls * n``; checked as
    ``read_typed_elems`` checks."""
    return read_typed_elems(msg, None, elem_cls, tag)[1]
