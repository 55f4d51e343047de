"""Spotting form fields that ask for secrets, which the spec says must not travel in form mode.

A field is a secret when its schema says so (`format: password`, `writeOnly`), or when its name, title or
description holds one of the secret words (`elicitation.sensitive_words`, default `DEFAULT_SENSITIVE_WORDS`:
English, German, French, Spanish, Italian, Portuguese, Dutch). Both sides are normalised the same way
before they are compared (`words_of`): NFKC, case folded, accents dropped, invisible characters dropped,
Cyrillic and Greek look-alikes read as the Latin letters they imitate (`pаssword` with a Cyrillic а), digits
inside words read as the letters they stand in for (`passw0rd`), and camelCase, snake_case, kebab-case
and punctuation split into words. A word then matches a whole word of the text, or a run of words for a
phrase (`api key` in `apiKey`, `api_key`, `API key`; also written as one word, `apikey`); a word of eight
letters or more also matches at the start or the end of a longer word (`userpassword`, `passwords`), so
that short words do not match inside ordinary ones (`pin` in `shipping`, `token` in `tokenizer`, `secret` in
`secretary`). docs/security.md says what this cannot catch.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from elicitgate.json_shapes import is_mapping

DEFAULT_SENSITIVE_WORDS: tuple[str, ...] = (
    # English
    "password", "passwd", "pwd", "pass", "passphrase", "passcode", "pin", "pin code", "otp", "totp", "hotp",
    "2fa", "mfa", "one time code", "one time password", "verification code", "security code", "auth code",
    "secret", "client secret", "secret key", "api key", "access key", "private key", "token", "access token",
    "refresh token", "bearer", "credential", "credentials", "mnemonic", "seed phrase", "recovery phrase",
    "recovery code", "backup code", "credit card", "card number", "cc number", "ccnum", "cvv", "cvc", "cvv2",
    "iban", "ssn", "social security number",
    # German
    "passwort", "kennwort", "geheimzahl", "geheimnis", "zugangsdaten", "zugangscode", "kreditkarte",
    "kartennummer", "kreditkartennummer", "kartenprüfnummer", "kartenpruefnummer", "sozialversicherungsnummer",
    # French
    "mot de passe", "mdp", "code secret", "cle api", "cle secrete", "code pin", "carte bancaire", "carte de credit",
    "numero de carte", "cryptogramme", "phrase secrete",
    # Spanish
    "contrasena", "clave secreta", "clave de acceso", "codigo de seguridad", "tarjeta de credito",
    "numero de tarjeta", "frase semilla",
    # Italian
    "parola d ordine", "codice segreto", "chiave api", "carta di credito", "numero di carta", "codice di sicurezza",
    # Portuguese
    "senha", "palavra passe", "chave api", "cartao de credito", "numero do cartao", "codigo de seguranca",
    # Dutch
    "wachtwoord", "pincode", "toegangscode", "geheime code", "creditcard", "kaartnummer", "beveiligingscode",
)
"""`elicitation.sensitive_words` when the operator names none (docs/security.md lists them)."""

AFFIX_LETTERS = 8
"""A word this long also matches at the start or end of a longer word; a shorter one only as a whole word."""

_LOOK_ALIKES = str.maketrans({
    # Cyrillic letters that look like Latin ones (after case folding)
    "а": "a", "в": "b", "е": "e", "ё": "e", "к": "k", "м": "m", "н": "h", "о": "o", "р": "p", "с": "c", "т": "t",
    "у": "y", "х": "x", "ѕ": "s", "і": "i", "ї": "i", "ј": "j", "ԁ": "d", "ԛ": "q", "ԝ": "w", "һ": "h",
    # Greek
    "α": "a", "β": "b", "ε": "e", "η": "n", "ι": "i", "κ": "k", "ν": "v", "ο": "o", "ρ": "p", "τ": "t", "υ": "u",
    "χ": "x", "ω": "w", "ς": "s", "σ": "s",
})
_DIGITS_AS_LETTERS = (str.maketrans("013457", "oieast"), str.maketrans("013457", "oleast"))
"""Digits inside a word read as letters (`passw0rd`, `p4ssw0rd`); 1 is tried as i and as l."""
_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_WORD = re.compile(r"[^\W_]+")
_LEET_WORD = re.compile(r"(?=.*[a-z])[a-z0-9]+")
"""A word of letters with digits among them (`passw0rd`), as opposed to a number or a plain word."""


def words_of(text: str) -> list[str]:
    """`text` as the matcher sees it: normalised words (see the module's docstring)."""
    text = unicodedata.normalize("NFKC", text)
    text = "".join(ch for ch in text if unicodedata.category(ch) != "Cf")  # zero-width joiners and the like
    text = _CAMEL.sub(" ", text).casefold().translate(_LOOK_ALIKES)
    text = "".join(ch for ch in unicodedata.normalize("NFKD", text) if not unicodedata.combining(ch))
    return _WORD.findall(text)


class SensitiveWords:
    """A list of secret words and phrases, ready to look for in a field's name, title and description."""

    def __init__(self, words: Iterable[str]) -> None:
        self._words: set[str] = set()
        self._phrases: list[tuple[str, ...]] = []
        self._affixes: list[str] = []
        for entry in words:
            parts = tuple(words_of(entry))
            if not parts:
                continue
            joined = "".join(parts)
            self._words.add(joined)
            if len(parts) > 1:
                self._phrases.append(parts)
            if len(joined) >= AFFIX_LETTERS:
                self._affixes.append(joined)

    def found_in(self, *texts: Any) -> bool:
        """Whether any of `texts` (a name, a title, a description) holds a secret word."""
        for text in texts:
            if isinstance(text, str) and text and self._holds(words_of(text)):
                return True
        return False

    def _holds(self, words: list[str]) -> bool:
        for word in words:
            for variant in _variants(word):
                if variant in self._words or any(
                    variant.startswith(affix) or variant.endswith(affix) for affix in self._affixes
                ):
                    return True
        if self._phrases:
            spaced = f" {' '.join(words)} "
            return any(f" {' '.join(phrase)} " in spaced for phrase in self._phrases)
        return False


def _variants(word: str) -> set[str]:
    if not _LEET_WORD.fullmatch(word) or word.isalpha():
        return {word}
    return {word, *(word.translate(table) for table in _DIGITS_AS_LETTERS), word.rstrip("0123456789")}


DEFAULT_WORDS = SensitiveWords(DEFAULT_SENSITIVE_WORDS)


def sensitive_words(words: Collection[str] | None, extra: Collection[str] = ()) -> SensitiveWords:
    """The matcher for `elicitation.sensitive_words` (None: the defaults) plus `extra_sensitive_words`."""
    if words is None and not extra:
        return DEFAULT_WORDS
    return SensitiveWords([*(DEFAULT_SENSITIVE_WORDS if words is None else words), *extra])


def sensitive_fields(schema: Any, words: SensitiveWords = DEFAULT_WORDS) -> list[str]:
    """Names of properties that look like they ask for a secret (by format, name, title or description)."""
    properties = schema.get("properties") if is_mapping(schema) else None
    if not is_mapping(properties):
        return []
    found: list[str] = []
    for name, given in properties.items():
        prop: Mapping[str, Any] = given if is_mapping(given) else {}
        secret_format = prop.get("format") == "password" or prop.get("writeOnly") is True
        if secret_format or words.found_in(name, prop.get("title"), prop.get("description")):
            found.append(str(name))
    return found


def secret_name(*names: Any, words: SensitiveWords = DEFAULT_WORDS) -> bool:
    """Whether a field or argument called this (name, title, ...) looks like it holds a secret."""
    return words.found_in(*(str(n) for n in names))
