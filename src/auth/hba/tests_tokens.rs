//! The lexical rules: comments, quotes, commas, continuations, `@` files
//! and include directives, and loading from disk.
use super::tests::{hba, hit, load, local, HBA};
use super::tokens::{logical_lines, next_token, RawToken};
use super::*;
use crate::test_dir::TempDir;

#[test]
fn comments_quotes_and_continuations() {
    let h = hba("# a comment\n\
         \n\
         local \"my db\",\"a\"\"b\" \"#u\" trust # trailing\n\
         local\tall \\\n  carol \\\n  md5\n\
         local all eve trust#comment\n\
         local all dave trust\r\n");
    assert_eq!(hit(&h, local("my db", "#u")), Some(3));
    assert_eq!(hit(&h, local("a\"b", "#u")), Some(3));
    assert_eq!(hit(&h, local("x", "carol")), Some(4));
    assert_eq!(h.rules()[1].method, Method::Md5);
    // A line keeps the number of its first physical line.
    assert_eq!(hit(&h, local("x", "eve")), Some(7));
    assert_eq!(hit(&h, local("x", "dave")), Some(8));
    let lines = logical_lines("a\\\nb\n\\\n\\\nc\nd");
    assert_eq!(
        lines,
        vec![(1, "ab".into()), (3, "c".into()), (6, "d".into())]
    );
    // A backslash left by a continuation does not continue again.
    let lines = logical_lines("x\\\\\n\nnext\n");
    assert_eq!(lines, vec![(1, "x\\".into()), (3, "next".into())]);
}

#[test]
fn commas_join_tokens_only_without_a_blank_before() {
    let mut pos = 0;
    let line = b"a,b, \"c,d\" ,e";
    let mut got = Vec::new();
    while let Some(t) = next_token(line, &mut pos).unwrap() {
        got.push(t);
    }
    let tok = |text: &str, q: bool, c: bool| RawToken {
        text: text.into(),
        initial_quote: q,
        trailing_comma: c,
    };
    assert_eq!(
        got,
        vec![
            tok("a", false, true),
            tok("b", false, true),
            tok("c,d", true, false),
            tok("e", false, false)
        ]
    );
    // `al"l"` is not quoted at its start, so it is the keyword all.
    let h = hba("local al\"l\" all trust");
    assert_eq!(h.rules()[0].databases, vec![DatabaseMatch::All]);
    let h = hba("local a, b all trust");
    assert_eq!(h.rules()[0].databases.len(), 2);
}

#[test]
fn at_files_expand_relative_to_the_including_file() {
    let files = MemoryFiles::default()
        .with(
            HBA,
            "local @dbs.txt @/abs/users trust\nlocal \"@dbs.txt\" all md5\n",
        )
        .with("/etc/pgharbor/dbs.txt", "app # comment\n\"my db\", @more\n")
        .with("/etc/pgharbor/more", "extra")
        .with("/abs/users", "alice\nbob");
    let h = load(files, false).unwrap();
    let r = &h.rules()[0];
    assert_eq!(
        r.databases,
        vec![
            DatabaseMatch::Name("app".into()),
            DatabaseMatch::Name("my db".into()),
            DatabaseMatch::Name("extra".into())
        ]
    );
    assert_eq!(
        r.users,
        vec![
            UserMatch::Name("alice".into()),
            UserMatch::Name("bob".into())
        ]
    );
    // A quoted @ is a name.
    assert_eq!(
        h.rules()[1].databases,
        vec![DatabaseMatch::Name("@dbs.txt".into())]
    );
    // @"a b" is an inclusion of the file "a b".
    let files = MemoryFiles::default()
        .with(HBA, "local @\"a b\" all trust")
        .with("/etc/pgharbor/a b", "spaced");
    let h = load(files, false).unwrap();
    assert_eq!(
        h.rules()[0].databases,
        vec![DatabaseMatch::Name("spaced".into())]
    );
}

#[test]
fn include_directives_keep_the_included_files_line_numbers() {
    let files = MemoryFiles::default()
        .with(HBA, "local all a trust\ninclude extra.conf\ninclude_if_exists nope.conf\ninclude_dir conf.d\nlocal all z trust\n")
        .with("/etc/pgharbor/extra.conf", "\n\nlocal all b md5\n")
        .with("/etc/pgharbor/conf.d/20-y.conf", "local all y trust")
        .with("/etc/pgharbor/conf.d/10-x.conf", "local all x trust")
        .with("/etc/pgharbor/conf.d/.hidden.conf", "garbage")
        .with("/etc/pgharbor/conf.d/notes.txt", "garbage");
    let h = load(files, false).unwrap();
    let seen: Vec<(String, usize)> = (h.rules().iter())
        .map(|r| (r.file.display().to_string(), r.line))
        .collect();
    assert_eq!(
        seen,
        vec![
            (HBA.to_owned(), 1),
            ("/etc/pgharbor/extra.conf".to_owned(), 3),
            ("/etc/pgharbor/conf.d/10-x.conf".to_owned(), 1),
            ("/etc/pgharbor/conf.d/20-y.conf".to_owned(), 1),
            (HBA.to_owned(), 5),
        ]
    );
}

#[test]
fn loads_from_disk_with_includes() {
    let tmp = TempDir::new("hba-loads-from-disk");
    let dir = tmp.path();
    std::fs::write(
        dir.join("pg_hba.conf"),
        "local all @users trust\nlocal all all peer map=m\n",
    )
    .unwrap();
    std::fs::write(dir.join("users"), "alice bob").unwrap();
    std::fs::write(dir.join("pg_ident.conf"), "m root postgres").unwrap();
    let h = Hba::load(&dir.join("pg_hba.conf"), Some(&dir.join("pg_ident.conf"))).unwrap();
    assert_eq!(h.rules().len(), 2);
    assert!(h.usermap_allows(h.rules()[1].map.as_deref(), "root", "postgres"));
    let missing = Hba::load(&dir.join("nope.conf"), None).unwrap_err();
    assert_eq!(missing.line, 0);
    assert!(
        missing.message.starts_with("could not open file"),
        "{missing}"
    );
    assert!(
        missing.message.ends_with("No such file or directory"),
        "{missing}"
    );
}
