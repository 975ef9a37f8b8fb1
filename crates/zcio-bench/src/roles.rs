//! The top of the crate: which benchmark family runs a child process.
//!
//! Every measured side is this binary re-executed with a hidden first
//! argument and a JSON spec ([`crate::child`] has the mechanics). Each
//! family owns its argument, its spec and its child entry point; this table
//! maps the argument to the family, so that no lower module needs to know
//! the families.

#[cfg(feature = "bridge")]
use crate::bridge;
use crate::{containers, proxyb, registryb, ring, semantics, splice, tokiob, transfer};

/// A family's child entry point: the arguments after its hidden argument
/// in, the process exit code out.
pub type ChildMain = fn(&[String]) -> i32;

/// The hidden first arguments and the child entry points they select.
pub const ROLES: &[(&str, ChildMain)] = &[
    #[cfg(feature = "bridge")]
    (bridge::CHILD_ARG, bridge::child_main),
    (transfer::CHILD_ARG, transfer::child_main),
    (ring::CHILD_ARG, ring::child_main),
    (proxyb::CHILD_ARG, proxyb::child_main),
    (splice::CHILD_ARG, splice::child_main),
    (semantics::CHILD_ARG, semantics::child_main),
    (tokiob::CHILD_ARG, tokiob::child_main),
    (containers::CHILD_ARG, containers::child_main),
    (registryb::CHILD_ARG, registryb::child_main),
];

/// If `args` (the process's arguments, program name first) make this
/// process a benchmark child, run it and return its exit code; `None` for
/// an ordinary invocation.
pub fn dispatch(args: &[String]) -> Option<i32> {
    let first = args.get(1)?;
    let (_, main) = ROLES.iter().find(|(arg, _)| arg == first)?;
    Some(main(&args[2..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn child_arguments_are_distinct_and_hidden() {
        for (i, (a, _)) in ROLES.iter().enumerate() {
            assert!(a.starts_with("__bench-"), "{a}");
            assert!(
                ROLES[..i].iter().all(|(b, _)| a != b),
                "{a} selects two families"
            );
        }
        let args = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            dispatch(&args(&["zcio-bench", "transfer", "--quick"])),
            None
        );
        assert_eq!(dispatch(&args(&["zcio-bench"])), None);
        // A child argument without its spec is refused with exit code 2.
        assert_eq!(dispatch(&args(&["zcio-bench", ring::CHILD_ARG])), Some(2));
    }
}
