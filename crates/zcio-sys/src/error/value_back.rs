//! `value_back_error!`: the shape of every error that gives its input back
//! (crossbeam-channel's `SendError<T>`): the reason and the value.

/// Defines an error type of an operation that gives its input back, shaped
/// like crossbeam-channel's `SendError<T>`: the reason ([`error`]) and the
/// value ([`into_inner`]); `Display` is the reason's.
#[macro_export]
#[doc(hidden)]
macro_rules! value_back_error {
    ($(#[$doc:meta])* $name:ident { $error:ty, $value:ty }) => {
        $(#[$doc])*
        pub struct $name {
            error: $error,
            value: $value,
        }

        impl $name {
            #[doc(hidden)]
            pub fn new(error: $error, value: $value) -> Self {
                Self { error, value }
            }

            /// Why the operation was refused.
            pub fn error(&self) -> &$error {
                &self.error
            }

            /// The value the operation was given, back.
            pub fn into_inner(self) -> $value {
                self.value
            }

            /// The reason and the value.
            pub fn into_parts(self) -> ($error, $value) {
                (self.error, self.value)
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($name))
                    .field("error", &self.error)
                    .finish_non_exhaustive()
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                std::fmt::Display::fmt(&self.error, f)
            }
        }

        impl std::error::Error for $name {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                std::error::Error::source(&self.error)
            }
        }
    };
}
