//! Writes every fuzz target's seeds into `fuzz/corpus/<target>/` (or the
//! folder given), each named by a hash of its bytes, so running it again
//! adds nothing new. `zcio-fuzz-seeds [DIR] [TARGET...]`.

use std::hash::{Hash, Hasher};
use std::path::PathBuf;

fn main() {
    let mut args = std::env::args().skip(1);
    let dir =
        PathBuf::from(args.next().unwrap_or_else(|| {
            concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/corpus").to_string()
        }));
    let only: Vec<String> = args.collect();
    for t in zcio_fuzz::all() {
        if !only.is_empty() && !only.iter().any(|n| n == t.name) {
            continue;
        }
        let sub = dir.join(t.name);
        if let Err(e) = std::fs::create_dir_all(&sub) {
            eprintln!("zcio-fuzz-seeds: cannot create {}: {e}", sub.display());
            std::process::exit(1);
        }
        let seeds = (t.seeds)();
        for s in &seeds {
            // Check every seed passes its own target before writing it.
            (t.run)(s);
            let mut h = std::collections::hash_map::DefaultHasher::new();
            s.hash(&mut h);
            let path = sub.join(format!("seed-{:016x}", h.finish()));
            if let Err(e) = std::fs::write(&path, s) {
                eprintln!("zcio-fuzz-seeds: cannot write {}: {e}", path.display());
                std::process::exit(1);
            }
        }
        println!("{:<24} {} seeds", t.name, seeds.len());
    }
}
