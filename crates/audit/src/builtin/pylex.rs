//! A small Python tokenizer: names, string literals (all prefixes, triple quotes), numbers
//! and punctuation, with line numbers; comments dropped. Enough to find imports, argparse,
//! click and absl flags, assignments and string literals without running Python. (No crate
//! does this without pulling in a whole Python parser; a tokenizer is all the rules need.)

/// What a token is.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Tok {
    Name(String),
    /// The literal's contents (escapes left as written).
    Str(String),
    Num(String),
    Op(char),
}

/// A token and where it starts.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Token {
    pub(super) tok: Tok,
    /// 1-based.
    pub(super) line: u32,
    /// Column (in characters) of the token.
    pub(super) col: u32,
    /// Whether this token starts a logical line (first on its line, outside brackets).
    pub(super) stmt_start: bool,
}

impl Token {
    pub(super) fn name(&self) -> Option<&str> {
        match &self.tok {
            Tok::Name(n) => Some(n),
            _ => None,
        }
    }

    pub(super) fn is_name(&self, n: &str) -> bool {
        self.name() == Some(n)
    }

    pub(super) fn is_op(&self, c: char) -> bool {
        self.tok == Tok::Op(c)
    }

    pub(super) fn str_value(&self) -> Option<&str> {
        match &self.tok {
            Tok::Str(s) => Some(s),
            _ => None,
        }
    }
}

/// The tokens of `src`. Never fails: an unterminated string runs to the end of the text.
pub(super) fn lex(src: &str) -> Vec<Token> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line, mut col) = (0usize, 1u32, 0u32);
    let mut depth = 0u32;
    let mut line_has_token = false;
    let mut continued = false;
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            i += 1;
            line += 1;
            col = 0;
            line_has_token = false;
            continue;
        }
        if c == '#' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            continue;
        }
        if c == '\\' && chars.get(i + 1) == Some(&'\n') {
            continued = true;
            i += 1;
            col += 1;
            continue;
        }
        if c.is_whitespace() {
            i += 1;
            col += 1;
            continue;
        }
        let stmt_start = !line_has_token && depth == 0 && !continued;
        continued = false;
        line_has_token = true;
        let (start_line, start_col) = (line, col);
        let quote_at = string_start(&chars, i);
        let tok = if let Some(q) = quote_at {
            let raw = chars[i..q].iter().any(|p| p.eq_ignore_ascii_case(&'r'));
            let (value, end, lines) = read_string(&chars, q, raw);
            line += lines;
            col += (end - i) as u32;
            i = end;
            Tok::Str(value)
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            col += (i - start) as u32;
            Tok::Name(chars[start..i].iter().collect())
        } else if c.is_ascii_digit()
            || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit))
        {
            let start = i;
            while i < chars.len() {
                let d = chars[i];
                let exp_sign =
                    (d == '-' || d == '+') && i > start && matches!(chars[i - 1], 'e' | 'E');
                if d.is_ascii_alphanumeric() || d == '.' || d == '_' || exp_sign {
                    i += 1;
                } else {
                    break;
                }
            }
            col += (i - start) as u32;
            Tok::Num(chars[start..i].iter().collect())
        } else {
            match c {
                '(' | '[' | '{' => depth += 1,
                ')' | ']' | '}' => depth = depth.saturating_sub(1),
                _ => {}
            }
            i += 1;
            col += 1;
            Tok::Op(c)
        };
        out.push(Token {
            tok,
            line: start_line,
            col: start_col,
            stmt_start,
        });
    }
    out
}

/// If a string literal starts at `i` (after an optional prefix of up to two of
/// `rbfu`), the index of its opening quote.
fn string_start(chars: &[char], i: usize) -> Option<usize> {
    for n in 0..=2 {
        let q = i + n;
        match chars.get(q) {
            Some('"' | '\'') => {
                let prefix_ok = chars[i..q]
                    .iter()
                    .all(|p| matches!(p.to_ascii_lowercase(), 'r' | 'b' | 'f' | 'u'));
                let boundary = i == 0 || !(chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
                return (prefix_ok && (n == 0 || boundary)).then_some(q);
            }
            Some(c) if c.is_alphabetic() => continue,
            _ => return None,
        }
    }
    None
}

/// Reads a literal whose quote is at `q`: its contents, the index after it, and how many
/// newlines it spans.
fn read_string(chars: &[char], q: usize, raw: bool) -> (String, usize, u32) {
    let quote = chars[q];
    let triple = chars.get(q + 1) == Some(&quote) && chars.get(q + 2) == Some(&quote);
    let mut i = if triple { q + 3 } else { q + 1 };
    let mut value = String::new();
    let mut lines = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\\' && i + 1 < chars.len() {
            if chars[i + 1] == '\n' {
                lines += 1;
            }
            if raw {
                value.push(c);
            }
            value.push(chars[i + 1]);
            i += 2;
            continue;
        }
        if c == quote
            && (!triple || (chars.get(i + 1) == Some(&quote) && chars.get(i + 2) == Some(&quote)))
        {
            return (value, if triple { i + 3 } else { i + 1 }, lines);
        }
        if c == '\n' {
            lines += 1;
            if !triple {
                return (value, i, lines - 1);
            }
        }
        value.push(c);
        i += 1;
    }
    (value, i, lines)
}

/// The top-level modules a file imports: `(module, line, guarded)`, where `guarded` means
/// the import is optional or deferred: inside a `try:`/`except ...:` block, an `if`/`elif`/
/// `else` block (a feature switch; not `if __name__ == "__main__":`), or a function (run only
/// when called). Relative imports (`from . import x`) are left out.
pub(super) fn imports(toks: &[Token]) -> Vec<(String, u32, bool)> {
    let mut out = Vec::new();
    // (col, whether it opens a guarding block) of each logical line so far.
    let mut starts: Vec<(u32, bool)> = Vec::new();
    for (k, t) in toks.iter().enumerate() {
        if !t.stmt_start {
            continue;
        }
        // Every enclosing block: walk back to ever smaller indentation.
        let mut col = t.col;
        let mut guarded = false;
        for (c, guards) in starts.iter().rev() {
            if *c < col {
                if *guards {
                    guarded = true;
                    break;
                }
                col = *c;
            }
        }
        let main_block = t.is_name("if") && toks.get(k + 1).is_some_and(|n| n.is_name("__name__"));
        let guards = !main_block
            && matches!(
                t.name(),
                Some("try" | "except" | "if" | "elif" | "else" | "def" | "async")
            );
        starts.push((t.col, guards));
        if t.is_name("import") {
            let mut j = k + 1;
            let mut expect_module = true;
            while let Some(n) = toks.get(j) {
                if n.line != t.line && !n.is_op(',') && n.stmt_start {
                    break;
                }
                match &n.tok {
                    Tok::Name(m) if expect_module => {
                        out.push((m.clone(), n.line, guarded));
                        expect_module = false;
                    }
                    Tok::Op(',') => expect_module = true,
                    Tok::Op(';') => break,
                    _ => {}
                }
                j += 1;
            }
        } else if t.is_name("from") {
            if let Some(Tok::Name(m)) = toks.get(k + 1).map(|n| &n.tok) {
                if toks
                    .get(k + 2)
                    .is_some_and(|n| n.is_name("import") || n.is_op('.'))
                {
                    out.push((m.clone(), t.line, guarded));
                }
            }
        }
    }
    out
}

/// One flag definition: `add_argument(...)`, `click.option(...)` or `flags.DEFINE_*(...)`.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct FlagDef {
    /// With their dashes (`--lr`, `-b`); absl flags get `--`.
    pub(super) flags: Vec<String>,
    /// The `default=` value as written (a number or a string's contents).
    pub(super) default: Option<String>,
    pub(super) line: u32,
}

/// The flags a file defines.
pub(super) fn flag_defs(toks: &[Token]) -> Vec<FlagDef> {
    let mut out = Vec::new();
    for (k, t) in toks.iter().enumerate() {
        let Some(name) = t.name() else { continue };
        let absl = name.starts_with("DEFINE_");
        if !(absl || name == "add_argument" || name == "option" || name == "argument") {
            continue;
        }
        if !toks.get(k + 1).is_some_and(|n| n.is_op('(')) {
            continue;
        }
        let mut def = FlagDef {
            flags: Vec::new(),
            default: None,
            line: t.line,
        };
        let (mut depth, mut positional, mut j) = (0u32, 0usize, k + 1);
        while let Some(n) = toks.get(j) {
            match &n.tok {
                Tok::Op('(' | '[' | '{') => depth += 1,
                Tok::Op(')' | ']' | '}') => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                Tok::Op(',') if depth == 1 => positional += 1,
                Tok::Str(s) if depth == 1 && s.starts_with('-') && !absl => {
                    def.flags.push(s.clone())
                }
                Tok::Str(s) if depth == 1 && absl && positional == 0 => {
                    def.flags.push(format!("--{s}"))
                }
                Tok::Name(kw)
                    if depth == 1
                        && kw == "default"
                        && toks.get(j + 1).is_some_and(|x| x.is_op('=')) =>
                {
                    def.default = literal_at(toks, j + 2);
                }
                _ if depth == 1 && absl && positional == 1 && def.default.is_none() => {
                    def.default = literal_at(toks, j);
                }
                _ => {}
            }
            j += 1;
        }
        if !def.flags.is_empty() {
            out.push(def);
        }
    }
    out
}

/// A number (with a leading minus) or a string's contents at `toks[j]`.
pub(super) fn literal_at(toks: &[Token], j: usize) -> Option<String> {
    match &toks.get(j)?.tok {
        Tok::Num(n) => Some(n.clone()),
        Tok::Str(s) => Some(s.clone()),
        Tok::Op('-') => match &toks.get(j + 1)?.tok {
            Tok::Num(n) => Some(format!("-{n}")),
            _ => None,
        },
        _ => None,
    }
}
