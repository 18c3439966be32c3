use super::*;
use insta::assert_snapshot;

fn endpoint() -> FelderaEndpoint {
    FelderaEndpoint::new("http://127.0.0.1:8080", "shop", None).unwrap()
}

#[test]
fn pipeline_get_url_is_exact() {
    let request = endpoint().get_pipeline(5_000);
    assert_eq!(request.method, Method::Get);
    assert_eq!(request.url, "http://127.0.0.1:8080/v0/pipelines/shop");
    assert!(request.body.is_empty());
    assert_eq!(request.timeout_ms, 5_000);
    assert!(request.headers.is_empty());
}

#[test]
fn base_url_with_or_without_trailing_slash_builds_the_same_urls() {
    let with = FelderaEndpoint::new("https://feldera.example/api/", "p", None).unwrap();
    let without = FelderaEndpoint::new("https://feldera.example/api", "p", None).unwrap();
    assert_eq!(with, without);
    assert_eq!(
        with.get_pipeline(1).url,
        "https://feldera.example/api/v0/pipelines/p"
    );
}

#[test]
fn ingress_uses_one_spelling_per_table_with_json_insert_delete_single_lines() {
    let e = endpoint();
    let body = Bytes::from_static(b"{\"insert\":{\"id\":1}}\n");
    let request = e.ingress(&Name::unquoted("users"), body.clone(), 30_000);
    assert_eq!(request.method, Method::Post);
    assert_eq!(
        request.url,
        "http://127.0.0.1:8080/v0/pipelines/shop/ingress/users?format=json&update_format=insert_delete&lines=single"
    );
    assert_eq!(request.body, body);
    assert_eq!(request.header("content-type"), Some("application/json"));
    assert_eq!(e.ingress_url(&Name::unquoted("users")), request.url);
}

#[test]
fn case_sensitive_tables_are_addressed_with_encoded_quotes() {
    assert_eq!(
        endpoint().ingress_url(&Name::quoted("TaBle")),
        "http://127.0.0.1:8080/v0/pipelines/shop/ingress/%22TaBle%22?format=json&update_format=insert_delete&lines=single"
    );
}

#[test]
fn pipeline_names_are_percent_encoded() {
    let e = FelderaEndpoint::new("http://h:1", "my pipe/1", None).unwrap();
    assert_eq!(
        e.get_pipeline(1).url,
        "http://h:1/v0/pipelines/my%20pipe%2F1"
    );
    assert_eq!(e.pipeline(), "my pipe/1");
}

#[test]
fn completion_tokens_are_percent_encoded() {
    let request = endpoint().completion_status("ab+c/d=", 1_000);
    assert_eq!(request.method, Method::Get);
    assert_eq!(
        request.url,
        "http://127.0.0.1:8080/v0/pipelines/shop/completion_status?token=ab%2Bc%2Fd%3D"
    );
}

#[test]
fn query_sql_is_url_encoded_and_asks_for_json() {
    let request = endpoint().query(r#"SELECT "Id" FROM t WHERE name = 'a b'"#, 1_000);
    assert_eq!(
        request.url,
        "http://127.0.0.1:8080/v0/pipelines/shop/query?sql=SELECT%20%22Id%22%20FROM%20t%20WHERE%20name%20%3D%20%27a%20b%27&format=json"
    );
}

#[test]
fn transactions_are_posts_to_their_endpoints() {
    let start = endpoint().start_transaction(1);
    let commit = endpoint().commit_transaction(1);
    assert_eq!((start.method, commit.method), (Method::Post, Method::Post));
    assert_eq!(
        start.url,
        "http://127.0.0.1:8080/v0/pipelines/shop/start_transaction"
    );
    assert_eq!(
        commit.url,
        "http://127.0.0.1:8080/v0/pipelines/shop/commit_transaction"
    );
}

#[test]
fn stats_and_checkpoints_use_their_endpoints() {
    let stats = endpoint().stats(2_000);
    assert_eq!(stats.method, Method::Get);
    assert_eq!(stats.url, "http://127.0.0.1:8080/v0/pipelines/shop/stats");
    assert_eq!(stats.timeout_ms, 2_000);
    let checkpoint = endpoint().checkpoint(3_000);
    assert_eq!(checkpoint.method, Method::Post);
    assert!(checkpoint.body.is_empty());
    assert_eq!(
        checkpoint.url,
        "http://127.0.0.1:8080/v0/pipelines/shop/checkpoint"
    );
    let status = endpoint().checkpoint_status(None, 4_000);
    assert_eq!(status.method, Method::Get);
    assert_eq!(
        status.url,
        "http://127.0.0.1:8080/v0/pipelines/shop/checkpoint_status"
    );
}

#[test]
fn checkpoint_status_carries_the_incarnation_percent_encoded() {
    let request = endpoint().checkpoint_status(Some("0198c2d4-7e1a-7b3c-9f00-1a2b3c4d5e6f"), 1_000);
    assert_eq!(
        request.url,
        "http://127.0.0.1:8080/v0/pipelines/shop/checkpoint_status?incarnation_uuid=0198c2d4-7e1a-7b3c-9f00-1a2b3c4d5e6f"
    );
    // Whatever came back as an incarnation cannot add parameters or change the path.
    let request = endpoint().checkpoint_status(Some("a b&c=d/e?f#g%"), 1_000);
    assert_eq!(
        request.url,
        "http://127.0.0.1:8080/v0/pipelines/shop/checkpoint_status?incarnation_uuid=a%20b%26c%3Dd%2Fe%3Ff%23g%25"
    );
}

#[test]
fn every_request_carries_the_bearer_key_when_configured() {
    let e = FelderaEndpoint::new("http://h", "p", Some("apikey:s3cret")).unwrap();
    for request in [
        e.get_pipeline(1),
        e.ingress(&Name::unquoted("t"), Bytes::new(), 1),
        e.completion_status("t", 1),
        e.query("SELECT 1", 1),
        e.start_transaction(1),
        e.commit_transaction(1),
        e.stats(1),
        e.checkpoint(1),
        e.checkpoint_status(Some("u"), 1),
    ] {
        assert_eq!(
            request.header("Authorization"),
            Some("Bearer apikey:s3cret")
        );
    }
}

#[test]
fn debug_output_never_shows_the_api_key_or_body() {
    let e = FelderaEndpoint::new("http://h", "p", Some("apikey:s3cret")).unwrap();
    let request = e.ingress(
        &Name::unquoted("t"),
        Bytes::from_static(b"{\"insert\":{}}"),
        7,
    );
    let printed = format!("{request:?} {e:?}");
    assert!(!printed.contains("s3cret"), "{printed}");
    assert_snapshot!(format!("{request:?}"), @r#"HttpRequest { method: Post, url: "http://h/v0/pipelines/p/ingress/t?format=json&update_format=insert_delete&lines=single", headers: [("Authorization", "<redacted>"), ("Content-Type", "application/json")], body_bytes: 13, timeout_ms: 7 }"#);
}

#[test]
fn user_info_is_masked_in_debug_output_and_errors() {
    // The configuration refuses such a FELDERA_URL; the endpoint itself takes it, so every
    // printer of its URLs must hide it.
    let e = FelderaEndpoint::new("http://alice:pw-s3cret@h:1/api", "p", Some("k")).unwrap();
    let request = e.get_pipeline(5);
    let printed = format!("{request:?} {e:?}");
    assert!(!printed.contains("alice"), "{printed}");
    assert!(!printed.contains("pw-s3cret"), "{printed}");
    assert!(
        printed.contains("http://***@h:1/api/v0/pipelines/p"),
        "{printed}"
    );
    // Still sent as given: masking is for printing only.
    assert_eq!(request.url, "http://alice:pw-s3cret@h:1/api/v0/pipelines/p");
    for bad in [
        "ftp://alice:pw-s3cret@h",
        "alice:pw-s3cret@h",
        "http://alice:pw-s3cret@h/a b",
    ] {
        let error = FelderaEndpoint::new(bad, "p", None)
            .unwrap_err()
            .to_string();
        assert!(!error.contains("pw-s3cret"), "{error}");
        assert!(!error.contains("alice"), "{error}");
        assert!(error.contains("***@h"), "{error}");
    }
}

#[test]
fn redact_userinfo_hides_everything_up_to_the_last_at_of_the_authority() {
    assert_eq!(redact_userinfo("http://h:1/p"), "http://h:1/p");
    assert_eq!(redact_userinfo("http://u@h"), "http://***@h");
    assert_eq!(
        redact_userinfo("https://u:p@h:443/x"),
        "https://***@h:443/x"
    );
    // A password with a raw `/` or `@` is hidden whole.
    assert_eq!(redact_userinfo("http://u:a/b@c@h/x"), "http://***@h/x");
    // An `@` in the query is not user info.
    assert_eq!(
        redact_userinfo("http://h/query?sql=a@b"),
        "http://h/query?sql=a@b"
    );
    assert_eq!(redact_userinfo("u:p@h"), "***@h");
    assert_eq!(redact_userinfo(""), "");
}

#[test]
fn bad_base_urls_pipelines_and_keys_are_refused_saying_what_is_accepted() {
    let err = |url: &str| {
        FelderaEndpoint::new(url, "p", None)
            .unwrap_err()
            .to_string()
    };
    assert_snapshot!(err("localhost:8080"), @"FELDERA_URL: `localhost:8080` is not an http:// or https:// URL; accepted: http://host[:port][/path] or https://host[:port][/path], without query or fragment");
    assert_snapshot!(err("http://"), @"FELDERA_URL: `http://` has no host; accepted: http://host[:port][/path] or https://host[:port][/path], without query or fragment");
    assert!(err("http://h/?x=1").contains("contains `?`"));
    assert!(FelderaEndpoint::new("HTTPS://H", "p", None).is_ok());
    let empty = FelderaEndpoint::new("http://h", "", None).unwrap_err();
    assert_eq!(empty.variable, "FELDERA_PIPELINE");
    let key = FelderaEndpoint::new("http://h", "p", Some("a\r\nX-Evil: 1")).unwrap_err();
    assert_eq!(key.variable, "FELDERA_API_KEY");
    assert!(!key.to_string().contains("Evil"));
}

#[test]
fn origin_names_scheme_host_and_port_never_the_path_or_credentials() {
    let origin = |url: &str| {
        FelderaEndpoint::new(url, "p", Some("secret-key"))
            .unwrap()
            .origin()
    };
    assert_eq!(origin("http://127.0.0.1:8080"), "http://127.0.0.1:8080");
    assert_eq!(
        origin("https://feldera.example/api/"),
        "https://feldera.example:443"
    );
    assert_eq!(
        origin("HTTP://feldera.example/x"),
        "http://feldera.example:80"
    );
    assert_eq!(origin("http://[::1]:9"), "http://[::1]:9");
    assert_eq!(origin("http://[::1]/"), "http://[::1]:80");
    assert_eq!(origin("http://user:pw@h:1/"), "http://h:1");
    assert!(!origin("http://h:1").contains("secret-key"));
}
