//! The state file's I/O: read it, and replace it atomically and durably. The core decides
//! what the file says and when it is written; this module only makes a write survive a crash
//! whole or not at all: a temporary file in the same directory, fsync, rename over the old
//! file, fsync of the directory.

use bytes::Bytes;
use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::Path;

/// The file's bytes; `Ok(None)` when it does not exist. Any other failure is an error: a
/// file that exists and cannot be read is never reported as absent.
pub fn read(path: &str) -> Result<Option<Bytes>, String> {
    match fs::read(path) {
        Ok(bytes) => Ok(Some(Bytes::from(bytes))),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("cannot read {path}: {e}")),
    }
}

/// Replaces `path` with `contents` (see the module docs), creating its directory if needed.
pub fn write_atomic(path: &str, contents: &[u8]) -> Result<(), String> {
    let target = Path::new(path);
    let dir = match target.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let context = |what: &str, e: std::io::Error| format!("cannot {what} for {path}: {e}");
    fs::create_dir_all(dir).map_err(|e| context("create the state directory", e))?;
    let file_name = target
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| format!("{path} does not name a file"))?;
    let temp = dir.join(format!(".{file_name}.tmp-{}", std::process::id()));
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&temp)
            .map_err(|e| context("create a temporary file", e))?;
        file.write_all(contents)
            .map_err(|e| context("write the temporary file", e))?;
        file.sync_all()
            .map_err(|e| context("fsync the temporary file", e))?;
        fs::rename(&temp, target).map_err(|e| context("rename the temporary file", e))?;
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| context("fsync the state directory", e))
    })();
    if result.is_err() {
        let _ = fs::remove_file(&temp);
    }
    result
}

/// Removes `path` (`slotline drop-slot`): `Ok(true)` when it was there, `Ok(false)` when
/// it was already absent.
pub fn remove(path: &str) -> Result<bool, String> {
    match fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
        Err(e) => Err(format!("cannot remove {path}: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remove_says_whether_the_file_was_there() {
        let dir = temp_dir("remove");
        let path = dir.join("s.state.json");
        let path = path.to_str().unwrap();
        write_atomic(path, b"x").unwrap();
        assert_eq!(remove(path), Ok(true));
        assert_eq!(read(path), Ok(None));
        assert_eq!(remove(path), Ok(false));
        fs::remove_dir_all(&dir).unwrap();
    }

    fn temp_dir(name: &str) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("slotline-state-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn absent_is_none_and_a_write_creates_the_directory_and_replaces_whole() {
        let dir = temp_dir("write");
        let path = dir.join("nested").join("s.state.json");
        let path = path.to_str().unwrap();
        assert_eq!(read(path), Ok(None));
        write_atomic(path, b"one").unwrap();
        write_atomic(path, b"two, longer").unwrap();
        assert_eq!(read(path).unwrap().as_deref(), Some(&b"two, longer"[..]));
        let leftovers: Vec<_> = fs::read_dir(dir.join("nested"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(leftovers.len(), 1, "no temporary file left: {leftovers:?}");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_unreadable_path_is_an_error_not_absent() {
        let dir = temp_dir("unreadable");
        fs::create_dir_all(dir.join("a-directory.state.json")).unwrap();
        let path = dir.join("a-directory.state.json");
        let error = read(path.to_str().unwrap()).unwrap_err();
        assert!(error.contains("cannot read"), "{error}");
        fs::remove_dir_all(&dir).unwrap();
    }
}
