//! Feldera's pipeline server over this crate's circuit: the `main` Feldera's SQL compiler
//! writes for a program (`CircuitWriter.java`), with the hand-written circuit in place of the
//! generated one.

fn main() {
    if let Err(e) = dbsp_adapters::server::server_main(slotline_real_feldera::circuit::circuit) {
        eprintln!("{e}");
        std::process::exit(1);
    }
}
