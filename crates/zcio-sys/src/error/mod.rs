//! The error vocabulary every layer shares, and nothing else: [`ErrorKind`]
//! (what kind of failure an error is, the same word on every transport and
//! in every language) and `value_back_error!` (the shape of an error that
//! gives its input back). A leaf: it imports no other module of the crate,
//! so every family's error can use it without a loop. `zcio::Error`, the
//! one type every family converts into, sits at the top (`any_error`).

mod kind;
mod value_back;

#[doc(hidden)]
pub use crate::value_back_error;
pub use kind::ErrorKind;
