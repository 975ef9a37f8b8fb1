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
    channel_hello,
    lane_peer,
    rendezvous_peer,
    bridge_samples,
    cli_sizes,
    cli_specs,
    cli_modules,
    ring_header,
    ring_attach,
    ring_read,
    splice_zstd,
    splice_seal,
    splice_cabi,
    semantics_wire,
    calibration_file,
    typed_read,
    array_header,
    registry_entry,
}
