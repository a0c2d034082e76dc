//! A shell command line split into statements of words and redirections, with quotes resolved
//! and the bodies of command substitutions set aside for separate classification. Only as much
//! of the shell grammar as classification needs; anything it cannot follow marks the input
//! malformed, which the classifier treats as mutating.

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Token {
    Word(Word),
    /// `>`, `>>`, `>|`, `&>`, `&>>`, `<>`; `dup` when written `>&` (a following fd number or `-`
    /// makes it a descriptor copy, anything else a file).
    RedirOut {
        dup: bool,
    },
    /// `<`, `<<<`: the next word is a source, not an argument.
    RedirIn,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub(super) struct Word {
    /// The text with quotes removed.
    pub text: String,
    /// Contained an unquoted or double-quoted expansion (`$x`, `${x}`, `$(…)`, backticks): its
    /// value is not known here.
    pub expands: bool,
}

#[derive(Debug, Default)]
pub(super) struct Lexed {
    pub statements: Vec<Vec<Token>>,
    pub nested: Vec<String>,
    pub malformed: bool,
}

struct Lexer {
    chars: Vec<char>,
    pos: usize,
    out: Lexed,
    statement: Vec<Token>,
    word: Option<Word>,
    /// Here-document delimiters seen on the current line: (delimiter, strip tabs, quoted).
    heredocs: Vec<(String, bool, bool)>,
}

pub(super) fn lex(src: &str) -> Lexed {
    let mut lx = Lexer {
        chars: src.chars().collect(),
        pos: 0,
        out: Lexed::default(),
        statement: Vec::new(),
        word: None,
        heredocs: Vec::new(),
    };
    lx.run();
    lx.out
}

impl Lexer {
    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.pos + ahead).copied()
    }

    fn word(&mut self) -> &mut Word {
        self.word.get_or_insert_with(Word::default)
    }

    fn end_word(&mut self) {
        if let Some(w) = self.word.take() {
            self.statement.push(Token::Word(w));
        }
    }

    fn end_statement(&mut self) {
        self.end_word();
        if !self.statement.is_empty() {
            self.out
                .statements
                .push(std::mem::take(&mut self.statement));
        }
    }

    fn run(&mut self) {
        while let Some(c) = self.peek(0) {
            match c {
                '\'' => self.quoted('\''),
                '"' => self.quoted('"'),
                '\\' => {
                    match self.peek(1) {
                        Some('\n') => {}
                        Some(n) => self.word().text.push(n),
                        None => self.word().text.push('\\'),
                    }
                    self.pos += 2;
                }
                '$' => self.dollar(),
                '`' => self.backtick(),
                '<' | '>' if self.peek(1) == Some('(') => {
                    self.pos += 2;
                    self.paren_body();
                    self.word().expands = true;
                }
                '>' => self.redirect_out(),
                '<' => self.redirect_in(),
                '&' if self.peek(1) == Some('>') => {
                    self.end_word();
                    self.pos += 2;
                    if self.peek(0) == Some('>') {
                        self.pos += 1;
                    }
                    self.statement.push(Token::RedirOut { dup: false });
                }
                '\n' => {
                    self.pos += 1;
                    self.end_statement();
                    self.heredoc_bodies();
                }
                ';' | '&' | '|' | '(' | ')' => {
                    self.pos += 1;
                    self.end_statement();
                }
                c if c.is_whitespace() => {
                    self.pos += 1;
                    self.end_word();
                }
                '#' if self.word.is_none() => self.comment(),
                c => {
                    self.word().text.push(c);
                    self.pos += 1;
                }
            }
        }
        self.end_statement();
        if !self.heredocs.is_empty() {
            // The line ended without the here-document's body: bash would wait for more input.
            self.out.malformed = true;
        }
    }

    fn comment(&mut self) {
        while let Some(c) = self.peek(0) {
            if c == '\n' {
                break;
            }
            self.pos += 1;
        }
    }

    /// A quoted span: literal up to `close`; inside double quotes, `\\` escapes and expansions
    /// keep their meaning.
    fn quoted(&mut self, close: char) {
        self.pos += 1;
        self.word();
        let double = close == '"';
        loop {
            match self.peek(0) {
                None => {
                    self.out.malformed = true;
                    return;
                }
                Some(c) if c == close => {
                    self.pos += 1;
                    return;
                }
                Some('\\') if double => self.escape_in_double_quotes(),
                Some('$') if double => self.dollar(),
                Some('`') if double => self.backtick(),
                Some(c) => {
                    self.word().text.push(c);
                    self.pos += 1;
                }
            }
        }
    }

    fn escape_in_double_quotes(&mut self) {
        match self.peek(1) {
            Some(n @ ('"' | '\\' | '$' | '`')) => self.word().text.push(n),
            Some('\n') => {}
            Some(n) => {
                self.word().text.push('\\');
                self.word().text.push(n);
            }
            None => self.out.malformed = true,
        }
        self.pos += 2;
    }

    /// `$(…)`, `$((…))`, `${…}`, `$name`, `$1`, `$?`: the word's value becomes unknown; command
    /// bodies are kept for classification.
    fn dollar(&mut self) {
        self.pos += 1;
        self.word().expands = true;
        self.word().text.push('$');
        match self.peek(0) {
            Some('(') => {
                self.pos += 1;
                self.paren_body();
            }
            Some('{') => {
                self.pos += 1;
                let body = self.until_matching('{', '}');
                // A default value may itself substitute a command: `${x:-$(cmd)}`.
                if body.contains("$(") || body.contains('`') || body.contains("<(") {
                    self.out.nested.push(body);
                }
            }
            Some(c) if c == '_' || c.is_ascii_alphanumeric() => {
                while matches!(self.peek(0), Some(c) if c == '_' || c.is_ascii_alphanumeric()) {
                    self.pos += 1;
                }
            }
            Some('?' | '!' | '#' | '*' | '@' | '-' | '$') => self.pos += 1,
            _ => {}
        }
    }

    /// After `(`: the body up to the matching `)`. `$((…))` arithmetic is not a command, but a
    /// substitution inside it is.
    fn paren_body(&mut self) {
        let body = self.until_matching('(', ')');
        if let Some(arith) = body.strip_prefix('(').and_then(|b| b.strip_suffix(')')) {
            if arith.contains("$(") || arith.contains('`') || arith.contains(';') {
                self.out.nested.push(arith.to_string());
            }
            return;
        }
        self.out.nested.push(body);
    }

    /// The text up to the `close` that balances an already consumed `open`, honouring quotes.
    fn until_matching(&mut self, open: char, close: char) -> String {
        let start = self.pos;
        let mut depth = 1usize;
        let mut quote: Option<char> = None;
        while let Some(c) = self.peek(0) {
            self.pos += 1;
            match (quote, c) {
                (Some('\''), '\'') => quote = None,
                (Some('\''), _) => {}
                (_, '\\') => self.pos += 1,
                (Some('"'), '"') => quote = None,
                (None, '\'' | '"') => quote = Some(c),
                (_, c) if c == open => depth += 1,
                (_, c) if c == close => {
                    depth -= 1;
                    if depth == 0 {
                        return self.chars[start..self.pos - 1].iter().collect();
                    }
                }
                _ => {}
            }
        }
        self.out.malformed = true;
        self.chars[start..self.chars.len()].iter().collect()
    }

    fn backtick(&mut self) {
        self.pos += 1;
        self.word().expands = true;
        let start = self.pos;
        while let Some(c) = self.peek(0) {
            self.pos += 1;
            match c {
                '\\' => self.pos += 1,
                '`' => {
                    let body: String = self.chars[start..self.pos - 1].iter().collect();
                    self.out.nested.push(body);
                    return;
                }
                _ => {}
            }
        }
        self.out.malformed = true;
        self.out.nested.push(self.chars[start..].iter().collect());
    }

    /// The digits of a word that directly precede `>` / `<` are a descriptor number.
    fn drop_fd_prefix(&mut self) {
        let is_fd = matches!(&self.word, Some(w) if !w.expands && !w.text.is_empty()
            && w.text.chars().all(|c| c.is_ascii_digit()));
        if is_fd {
            self.word = None;
        }
        self.end_word();
    }

    fn redirect_out(&mut self) {
        self.drop_fd_prefix();
        self.pos += 1;
        let dup = match self.peek(0) {
            Some('>' | '|') => {
                self.pos += 1;
                false
            }
            Some('&') => {
                self.pos += 1;
                true
            }
            _ => false,
        };
        self.statement.push(Token::RedirOut { dup });
    }

    fn redirect_in(&mut self) {
        self.drop_fd_prefix();
        self.pos += 1;
        match (self.peek(0), self.peek(1)) {
            (Some('<'), Some('<')) => {
                self.pos += 2;
                self.statement.push(Token::RedirIn);
            }
            (Some('<'), _) => {
                self.pos += 1;
                let strip = self.peek(0) == Some('-');
                if strip {
                    self.pos += 1;
                }
                self.heredoc_delimiter(strip);
            }
            (Some('>'), _) => {
                // `<>`: opened for reading and writing.
                self.pos += 1;
                self.statement.push(Token::RedirOut { dup: false });
            }
            (Some('&'), _) => {
                self.pos += 1;
                self.statement.push(Token::RedirIn);
            }
            _ => self.statement.push(Token::RedirIn),
        }
    }

    /// Reads the delimiter word of `<<` / `<<-`; its body is skipped at the end of the line.
    fn heredoc_delimiter(&mut self, strip: bool) {
        while matches!(self.peek(0), Some(' ' | '\t')) {
            self.pos += 1;
        }
        let mut delim = String::new();
        let mut quoted = false;
        while let Some(c) = self.peek(0) {
            if c.is_whitespace() || matches!(c, ';' | '&' | '|' | '<' | '>' | '(' | ')') {
                break;
            }
            self.pos += 1;
            match c {
                '\'' | '"' => quoted = true,
                '\\' => quoted = true,
                c => delim.push(c),
            }
        }
        if delim.is_empty() {
            self.out.malformed = true;
            return;
        }
        self.heredocs.push((delim, strip, quoted));
    }

    /// After a newline: the bodies of the line's here-documents. An unquoted body may substitute
    /// commands, so such a body is classified as a command line (over-strict, never lax).
    fn heredoc_bodies(&mut self) {
        for (delim, strip, quoted) in std::mem::take(&mut self.heredocs) {
            let mut body = String::new();
            let mut closed = false;
            while self.pos < self.chars.len() {
                let end = self.chars[self.pos..]
                    .iter()
                    .position(|&c| c == '\n')
                    .map_or(self.chars.len(), |i| self.pos + i);
                let line: String = self.chars[self.pos..end].iter().collect();
                self.pos = (end + 1).min(self.chars.len());
                let candidate = if strip {
                    line.trim_start_matches('\t')
                } else {
                    &line
                };
                if candidate == delim {
                    closed = true;
                    break;
                }
                body.push_str(&line);
                body.push('\n');
            }
            if !closed {
                self.out.malformed = true;
            }
            if !quoted && (body.contains("$(") || body.contains('`') || body.contains("${")) {
                self.out.nested.push(body);
            }
        }
    }
}
