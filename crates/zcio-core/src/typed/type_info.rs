//! [`TypeInfo`]: a type as a type tag describes it — name, schema
//! version and layout — as a typed-message error shows it.

/// A type as a tag describes it (what
/// [`TypedError::TagMismatch`](crate::typed::TypedError::TagMismatch) shows
/// on each side).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TypeInfo {
    /// The name, as far as the tag carries it (at most 72 bytes; control
    /// characters escaped, invalid UTF-8 replaced).
    pub name: String,
    /// Whether the name was longer than the tag carries.
    pub name_truncated: bool,
    /// The schema version.
    pub schema: u32,
    /// The size; for a type ending in a slice, its size with no elements.
    pub size: u64,
    /// Bytes per trailing element; 0 for a sized type.
    pub elem_size: u64,
    /// Whether the type ends in a slice.
    pub slice_tail: bool,
    /// The alignment (`None` where the receiver learns it only from a
    /// value: a type ending in a slice, before its bytes are cast).
    pub align: Option<u64>,
}

impl std::fmt::Display for TypeInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let more = if self.name_truncated { "…" } else { "" };
        write!(f, "`{}{more}` v{} (size ", self.name, self.schema)?;
        match (self.slice_tail, self.size) {
            (false, size) => write!(f, "{size}")?,
            (true, 0) => write!(f, "n × {}", self.elem_size)?,
            (true, size) => write!(f, "{size} + n × {}", self.elem_size)?,
        }
        match self.align {
            Some(a) => write!(f, ", align {a})"),
            None => write!(f, ")"),
        }
    }
}
