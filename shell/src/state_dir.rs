//! The default state directory: where `<slot>.state.json` lives when `STATE_DIR` is not
//! set. It must not depend on the working directory (a `cd` would otherwise copy every
//! table again), and a service and a person running slotline by hand on one host should
//! find the same file (docs/guide/configuration.md, "Options").
//!
//! In order: `$XDG_STATE_HOME/slotline` (an absolute `XDG_STATE_HOME`, as the XDG base
//! directory specification says), `/var/lib/slotline` when this process may write there
//! (it exists and is writable, or `/var/lib` is writable to create it: root and the
//! package's services), `$HOME/.local/state/slotline` (the XDG default) for a person.
//! Nothing is created here: the state file's first write creates the directory.

/// The system-wide directory, for root and services.
pub const SYSTEM_STATE_DIR: &str = "/var/lib/slotline";

/// The default state directory for this process, or `None` when it has none (then
/// `STATE_DIR` is required).
pub fn default_state_dir() -> Option<String> {
    let var = |name: &str| std::env::var(name).ok();
    choose(&var, &|path| writable(path))
}

/// The rule of the module docs, with the environment and the file system as arguments.
pub(crate) fn choose(
    var: &dyn Fn(&str) -> Option<String>,
    writable: &dyn Fn(&str) -> bool,
) -> Option<String> {
    let absolute = |name: &str| var(name).filter(|v| v.starts_with('/'));
    if let Some(state_home) = absolute("XDG_STATE_HOME") {
        return Some(format!("{}/slotline", state_home.trim_end_matches('/')));
    }
    let system = std::path::Path::new(SYSTEM_STATE_DIR);
    let system_usable = if system.exists() {
        system.is_dir() && writable(SYSTEM_STATE_DIR)
    } else {
        writable("/var/lib")
    };
    if system_usable {
        return Some(SYSTEM_STATE_DIR.to_owned());
    }
    absolute("HOME").map(|home| format!("{}/.local/state/slotline", home.trim_end_matches('/')))
}

/// access(2) with W_OK: this process may create files in `path` (its real ids, as a
/// shell's `test -w` asks).
fn writable(path: &str) -> bool {
    rustix::fs::access(path, rustix::fs::Access::WRITE_OK).is_ok()
}

/// The working directory, to make a relative `STATE_DIR` absolute.
pub fn working_dir() -> Option<String> {
    std::env::current_dir()
        .ok()
        .and_then(|dir| dir.to_str().map(str::to_owned))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn xdg_state_home_then_the_system_directory_then_home() {
        let yes = |_: &str| true;
        let no = |_: &str| false;
        let all = [("XDG_STATE_HOME", "/x/state/"), ("HOME", "/home/ada")];
        assert_eq!(
            choose(&env(&all), &yes).as_deref(),
            Some("/x/state/slotline")
        );
        let home = [("HOME", "/home/ada")];
        assert_eq!(
            choose(&env(&home), &yes).as_deref(),
            Some(SYSTEM_STATE_DIR),
            "a process that may write /var/lib (root, a service) shares the system directory"
        );
        assert_eq!(
            choose(&env(&home), &no).as_deref(),
            Some("/home/ada/.local/state/slotline")
        );
        let relative = [("XDG_STATE_HOME", "state"), ("HOME", "ada")];
        assert_eq!(
            choose(&env(&relative), &no),
            None,
            "relative XDG_STATE_HOME and HOME are ignored, as the specification says"
        );
        assert_eq!(choose(&env(&[]), &no), None);
    }

    #[test]
    fn access_reports_what_this_process_may_write() {
        let dir = std::env::temp_dir().join(format!("slotline-state-dir-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert!(writable(dir.to_str().unwrap()));
        assert!(!writable(dir.join("absent").to_str().unwrap()));
        assert!(!writable("/proc/1/nonexistent/x"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
