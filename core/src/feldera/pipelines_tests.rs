use super::*;

fn answered(status: u16, body: &str) -> Result<Vec<String>, String> {
    classify_pipeline_list(Reply::Answered {
        status,
        body: body.as_bytes(),
    })
}

#[test]
fn the_list_is_read_sorted_and_deduplicated() {
    let body = r#"[{"id":"1","name":"shop","deployment_status":"Running"},
                   {"id":"2","name":"audit"},{"id":"3","name":"shop"}]"#;
    assert_eq!(answered(200, body), Ok(vec!["audit".into(), "shop".into()]));
    assert_eq!(answered(200, "[]"), Ok(vec![]));
}

#[test]
fn an_unreadable_or_refused_list_says_why() {
    assert!(answered(200, r#"{"name":"shop"}"#)
        .unwrap_err()
        .contains("not a JSON array"));
    assert!(answered(200, r#"[{"id":"1"}]"#)
        .unwrap_err()
        .contains("not a JSON array of pipelines with names"));
    let refused = answered(
        401,
        r#"{"message":"Unauthorized","error_code":"Unauthorized","details":{}}"#,
    );
    assert!(refused.unwrap_err().starts_with("HTTP 401 Unauthorized"));
    let failed = classify_pipeline_list(Reply::Failed {
        error: "connection refused",
    });
    assert!(failed.unwrap_err().contains("connection refused"));
}

#[test]
fn the_description_lists_names_says_none_or_says_why() {
    assert_eq!(
        describe_pipelines("shop", &Ok(vec![])),
        "Feldera has no pipeline; create shop or set FELDERA_PIPELINE"
    );
    assert_eq!(
        describe_pipelines("shop", &Ok(vec!["audit".into(), "Shop".into()])),
        "Feldera has pipelines \"audit\", \"Shop\"; set FELDERA_PIPELINE to one of them"
    );
    let many: Vec<String> = (0..PIPELINES_LISTED + 3)
        .map(|i| format!("p{i:02}"))
        .collect();
    let text = describe_pipelines("shop", &Ok(many));
    assert!(text.contains("\"p19\" and 3 more;"), "{text}");
    assert!(!text.contains("\"p20\""), "{text}");
    assert_eq!(
        describe_pipelines("shop", &Err("HTTP 401 Unauthorized: no".into())),
        "the list of Feldera's pipelines could not be read: HTTP 401 Unauthorized: no"
    );
}
