//! Records the git commit the binaries are built from, for `--version`: `SLOTLINE_COMMIT`
//! from the build environment when set (a package built from a source tarball), else
//! `git rev-parse --short=12 HEAD`, else `unknown`. (Uncommitted changes are not marked:
//! noticing them would mean rebuilding on every edit.)

use std::path::PathBuf;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .filter(|s| !s.is_empty())
}

fn main() {
    println!("cargo:rerun-if-env-changed=SLOTLINE_COMMIT");
    let commit = match std::env::var("SLOTLINE_COMMIT") {
        Ok(commit) if !commit.is_empty() => commit,
        _ => {
            // Rebuild when HEAD moves or the branch it names does.
            if let Some(p) = git(&["rev-parse", "--git-path", "HEAD"]) {
                println!("cargo:rerun-if-changed={}", PathBuf::from(p).display());
            }
            if let Some(reference) = git(&["symbolic-ref", "-q", "HEAD"]) {
                if let Some(p) = git(&["rev-parse", "--git-path", &reference]) {
                    println!("cargo:rerun-if-changed={}", PathBuf::from(p).display());
                }
            }
            git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".to_owned())
        }
    };
    println!("cargo:rustc-env=SLOTLINE_COMMIT={commit}");
}
