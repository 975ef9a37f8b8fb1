//! One module per fuzz target; [`ALL`] lists them. A target's module docs
//! state its invariant; its `run` feeds one input through the production
//! code and its `seeds` encode real values.

use crate::Target;

macro_rules! targets {
    ($($name:ident),* $(,)?) => {
        $(pub mod $name;)*
        /// Every target, in the order `scripts/fuzz` runs them.
        pub static ALL: &[Target] = &[
            $(Target { name: stringify!($name), run: $name::run, seeds: $name::seeds },)*
        ];
    };
}

targets! {
    channel_records,
    channel_peer,
}
