//! libpq's password file (`.pgpass`): lines of `hostname:port:database:username:password`,
//! the first line whose four fields match the connection gives the password.
//!
//! A field is `*` (matches anything) or a literal; `\:` and `\\` escape a colon and a
//! backslash anywhere in a line. Lines starting with `#` and lines with fewer than five
//! fields are skipped. The shells read the file (and check its permissions); this module
//! only matches what they pass in, and never reports what it read.

/// The password of the first line matching `[host, port, database, user]`.
pub(crate) fn find(contents: &str, wanted: [&str; 4]) -> Option<String> {
    contents
        .lines()
        .map(|line| line.strip_suffix('\r').unwrap_or(line))
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .find_map(|line| {
            let fields = split(line)?;
            let matches = fields[..4]
                .iter()
                .zip(wanted)
                .all(|(field, want)| field == "*" || field == want);
            matches.then(|| fields[4].clone())
        })
}

/// The five fields of a line, unescaped; `None` for a line with fewer. The password is
/// everything after the fourth unescaped colon (libpq keeps further colons in it).
fn split(line: &str) -> Option<[String; 5]> {
    let mut fields: Vec<String> = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(escaped) => fields.last_mut()?.push(escaped),
                None => fields.last_mut()?.push('\\'),
            },
            ':' if fields.len() < 5 => fields.push(String::new()),
            c => fields.last_mut()?.push(c),
        }
    }
    fields.try_into().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const WANT: [&str; 4] = ["db.example", "5432", "app", "slot"];

    #[test]
    fn the_first_matching_line_wins() {
        let file = "other:5432:app:slot:no\ndb.example:5432:app:slot:first\n*:*:*:*:second\n";
        assert_eq!(find(file, WANT).as_deref(), Some("first"));
    }

    #[test]
    fn stars_match_any_value_of_their_field() {
        assert_eq!(find("*:5432:*:slot:pw", WANT).as_deref(), Some("pw"));
        assert_eq!(find("*:5433:*:slot:pw", WANT), None, "the port differs");
        assert_eq!(find("*:*:*:other:pw", WANT), None, "the user differs");
    }

    #[test]
    fn escaped_colons_and_backslashes_are_literal() {
        let file = r"db.example:5432:app:slot:pa\:ss\\word";
        assert_eq!(find(file, WANT).as_deref(), Some(r"pa:ss\word"));
        let host = ["fe80::1", "5432", "app", "slot"];
        assert_eq!(
            find(r"fe80\:\:1:5432:app:slot:v6", host).as_deref(),
            Some("v6")
        );
        assert_eq!(
            find("fe80::1:5432:app:slot:v6", host),
            None,
            "unescaped colons split"
        );
    }

    #[test]
    fn the_password_keeps_unescaped_colons_after_the_fourth() {
        assert_eq!(find("*:*:*:*:a:b:c", WANT).as_deref(), Some("a:b:c"));
    }

    #[test]
    fn comments_short_lines_and_crlf_are_handled() {
        let file = "# db.example:5432:app:slot:commented\r\n*:*:app\r\n\r\n*:*:app:slot:crlf\r\n";
        assert_eq!(find(file, WANT).as_deref(), Some("crlf"));
        assert_eq!(find("", WANT), None);
    }

    #[test]
    fn a_field_is_matched_whole_not_as_a_prefix() {
        assert_eq!(find("db:5432:app:slot:pw", WANT), None);
        assert_eq!(find("db.example:5432:app:slot2:pw", WANT), None);
    }
}
