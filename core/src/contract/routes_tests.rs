use super::*;
use crate::schema::program::parse_program_schema;
use insta::assert_snapshot;

fn pg(schema: &str, name: &str) -> PgTable {
    PgTable {
        schema: schema.into(),
        name: name.into(),
    }
}

fn route(schema: &str, name: &str, destination: Name) -> Route {
    Route {
        source: pg(schema, name),
        destination,
    }
}

fn error(text: &str) -> String {
    parse_tables(text).unwrap_err().to_string()
}

#[test]
fn bare_names_route_public_tables_to_feldera_tables_of_the_same_name() {
    assert_eq!(
        parse_tables("users,items").unwrap(),
        vec![
            route("public", "users", Name::unquoted("users")),
            route("public", "items", Name::unquoted("items")),
        ]
    );
}

#[test]
fn destinations_and_schemas_are_optional_and_whitespace_around_items_is_ignored() {
    assert_eq!(
        parse_tables(" users:people , public.items:lineitems ").unwrap(),
        vec![
            route("public", "users", Name::unquoted("people")),
            route("public", "items", Name::unquoted("lineitems")),
        ]
    );
}

#[test]
fn unquoted_names_fold_to_lowercase_and_quoted_names_keep_case() {
    assert_eq!(
        parse_tables(r#"Sales.Users:USERS,"Sales"."Items":"Items""#).unwrap(),
        vec![
            route("sales", "users", Name::unquoted("users")),
            route("Sales", "Items", Name::quoted("Items")),
        ]
    );
}

#[test]
fn a_quoted_postgres_table_without_destination_targets_the_quoted_feldera_name() {
    assert_eq!(
        parse_tables(r#""MyTable""#).unwrap(),
        vec![route("public", "MyTable", Name::quoted("MyTable"))]
    );
}

#[test]
fn quotes_protect_separators_and_doubled_quotes_escape() {
    assert_eq!(
        parse_tables(r#""a,b:c.d"."say ""hi""":"x.y""#).unwrap(),
        vec![route("a,b:c.d", "say \"hi\"", Name::quoted("x.y"))]
    );
}

#[test]
fn duplicate_sources_are_rejected_after_case_folding() {
    assert_snapshot!(error("users,public.USERS:other"), @"TABLES: PostgreSQL table public.users is routed twice; accepted: each PostgreSQL table and each Feldera table in one route at most");
}

#[test]
fn quoted_and_unquoted_sources_with_different_case_are_distinct() {
    assert_eq!(parse_tables(r#"users,"Users":u2"#).unwrap().len(), 2);
}

#[test]
fn duplicate_destinations_are_rejected_by_feldera_case_rules() {
    assert_snapshot!(error(r#"a:people,b:"people""#), @r#"TABLES: Feldera table "people" is the destination of both public.a and public.b; accepted: each PostgreSQL table and each Feldera table in one route at most"#);
    assert!(parse_tables("a:People,b:PEOPLE").is_err());
    assert!(parse_tables(r#"a:people,b:"People""#).is_ok());
}

#[test]
fn empty_items_are_rejected() {
    assert_snapshot!(error("users,,items"), @r#"TABLES: item 2 of `users,,items` is empty; accepted: comma-separated items `pg_table[:feldera_table]`; pg_table is `name` or `schema.name` (schema defaults to public; unquoted names fold to lowercase, "Quoted" names keep their case) and feldera_table is one name (unquoted matches case-insensitively, "Quoted" exactly), e.g. `users,public.items:lineitems,orders:"Orders"`"#);
    assert!(parse_tables("").is_err());
    assert!(parse_tables("users,").is_err());
}

#[test]
fn stray_colons_and_dots_are_rejected_saying_where() {
    let problem = |text: &str| parse_tables(text).unwrap_err().problem;
    assert_snapshot!(problem("users:"), @"item 1 `users:`: the Feldera table name is empty");
    assert_snapshot!(problem(":people"), @"item 1 `:people`: the PostgreSQL table name is empty");
    assert_snapshot!(problem("a:b:c"), @"item 1 `a:b:c`: more than one `:` outside quotes");
    assert_snapshot!(problem("a.b.c"), @"item 1 `a.b.c`: more than one `.` outside quotes in the PostgreSQL name");
    assert_snapshot!(problem(".users"), @"item 1 `.users`: the PostgreSQL schema name is empty");
    assert_snapshot!(problem("users:public.people"), @"item 1 `users:public.people`: Feldera table `public.people` has a `.`: Feldera has no schemas (quote the name if the dot is part of it)");
}

#[test]
fn unbalanced_quotes_and_bad_characters_are_rejected() {
    let problem = |text: &str| parse_tables(text).unwrap_err().problem;
    assert_snapshot!(problem(r#""users"#), @r#"`"users` has an unbalanced double quote"#);
    assert_snapshot!(problem(r#""us"ers:x"#), @r#"item 1 `"us"ers:x`: PostgreSQL table `"us"ers` has text after its closing quote"#);
    assert_snapshot!(problem("my table"), @"item 1 `my table`: unquoted PostgreSQL table name `my table` contains ` ` (quote the name to use it)");
    assert_snapshot!(problem("1users"), @"item 1 `1users`: unquoted PostgreSQL table name `1users` starts with a digit (quote the name to use it)");
    assert_snapshot!(problem(r#"users:"""#), @r#"item 1 `users:""`: the Feldera table name `""` is empty"#);
}

#[test]
fn the_pair_form_builds_one_route_and_names_its_variables() {
    assert_eq!(
        parse_pair("Public.Users", Some(r#""Users""#)).unwrap(),
        route("public", "users", Name::quoted("Users"))
    );
    assert_eq!(
        parse_pair("items", None).unwrap(),
        route("public", "items", Name::unquoted("items"))
    );
    assert_eq!(parse_pair("a b", None).unwrap_err().variable, "PG_TABLE");
    assert_eq!(
        parse_pair("a", Some("x:y")).unwrap_err().variable,
        "FELDERA_TABLE"
    );
}

#[test]
fn pg_names_print_quoted_only_when_needed() {
    assert_eq!(pg("public", "users").to_string(), "public.users");
    assert_eq!(pg("Sales", "my \"t\"").to_string(), r#""Sales"."my ""t""""#);
    assert!(pg("public", "users").is("public", "users"));
    assert!(!pg("public", "users").is("public", "Users"));
}

const SCHEMA: &str = r#"{"inputs":[
    {"name":"users","case_sensitive":false,"fields":[]},
    {"name":"TaBle","case_sensitive":true,"fields":[]}],
  "outputs":[{"name":"error_view","case_sensitive":false,"fields":[]}]}"#;

#[test]
fn routes_resolve_to_the_schema_spelling_of_their_table() {
    let schema = parse_program_schema(SCHEMA.as_bytes()).unwrap();
    let routes = parse_tables(r#"Users,x:"TaBle""#).unwrap();
    let resolved = resolve(&routes, &schema).unwrap();
    assert_eq!(resolved[0].table.name, Name::unquoted("users"));
    assert_eq!(resolved[1].source, pg("public", "x"));
    assert_eq!(resolved[1].table.name, Name::quoted("TaBle"));
}

#[test]
fn a_missing_destination_lists_the_tables_that_exist() {
    let schema = parse_program_schema(SCHEMA.as_bytes()).unwrap();
    let err = resolve(&parse_tables("orders").unwrap(), &schema).unwrap_err();
    assert_snapshot!(err, @r#"TABLES/FELDERA_TABLE: Feldera has no table orders (destination of public.orders); accepted: a table of the Feldera program: users, "TaBle""#);
    // Case-sensitive names are not found by another case.
    assert!(resolve(&parse_tables("x:table").unwrap(), &schema).is_err());
}

#[test]
fn a_view_is_not_a_destination() {
    let schema = parse_program_schema(SCHEMA.as_bytes()).unwrap();
    let err = resolve(&parse_tables("error_view").unwrap(), &schema).unwrap_err();
    assert_eq!(err.problem, "error_view is a Feldera view, not a table");
}

#[test]
fn an_unreadable_destination_reports_why() {
    let body = r#"{"inputs":[{"name":"t","fields":[
        {"name":"a","columntype":{"type":"GEOMETRY","nullable":true}}]}],"outputs":[]}"#;
    let schema = parse_program_schema(body.as_bytes()).unwrap();
    let err = resolve(&parse_tables("t").unwrap(), &schema).unwrap_err();
    assert!(err.problem.starts_with("Feldera table t cannot be used: Feldera schema at `inputs[0].fields[0].columntype.type`: unknown column type `GEOMETRY`"), "{}", err.problem);
}

#[test]
fn a_table_with_columns_differing_only_in_case_is_refused_at_start() {
    let body = r#"{"inputs":[{"name":"t","case_sensitive":false,"primary_key":["id"],"fields":[
        {"name":"id","case_sensitive":false,"columntype":{"type":"BIGINT","nullable":false}},
        {"name":"ID","case_sensitive":true,"columntype":{"type":"BIGINT","nullable":true}}]}],
        "outputs":[]}"#;
    let schema = parse_program_schema(body.as_bytes()).unwrap();
    let err = resolve(&parse_tables("t").unwrap(), &schema).unwrap_err();
    assert_snapshot!(err, @r#"TABLES/FELDERA_TABLE: Feldera table t has columns id and "ID", whose names differ only in case: Feldera's JSON input finds a row's columns by their lowercase names, so it would give one column's values to the other or refuse the rows; accepted: a destination table whose column names differ in more than case (rename one of them in the Feldera program)"#);
}

proptest::proptest! {
    /// Whatever the names, printing a route the way errors print it and parsing it back gives
    /// the same route: quoting and `""` escapes are consistent both ways.
    #[test]
    fn printed_routes_parse_back_to_themselves(
        schema in "[a-zA-Z0-9_ .,:\"$é]{1,12}",
        name in "[a-zA-Z0-9_ .,:\"$é]{1,12}",
        destination in "[a-zA-Z0-9_ .,:\"é]{1,12}",
    ) {
        let source = pg(&schema, &name);
        let destination = Name::quoted(&destination);
        let text = format!("{source}:{destination}");
        let parsed = parse_tables(&text).unwrap();
        proptest::prop_assert_eq!(parsed, vec![Route { source, destination }]);
    }

}
