"""Validating JUnit XML against the vendored junit-10.xsd: with xmlschema (the dev extra) when it
is installed, else with a strict structural check read from the same XSD (each element's allowed
and required attributes, allowed children, whether it may hold text, and the SUREFIRE_TIME
pattern), so the tests that use it never skip."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from attn_kit.base.paths import schemas_dir

XSD = schemas_dir() / "junit-10.xsd"
XS = "{http://www.w3.org/2001/XMLSchema}"

try:
    import xmlschema
except ImportError:  # pragma: no cover - the dev extra installs it
    xmlschema = None


@dataclass
class Rule:
    attributes: dict[str, str] = field(default_factory=dict)  # name -> type
    required: set[str] = field(default_factory=set)
    children: set[str] = field(default_factory=set)
    text: bool = False  # mixed content or a simple type


def rules() -> tuple[dict[str, Rule], dict[str, str]]:
    """element name -> Rule, and simple type name -> its pattern, from the XSD itself."""
    root = ET.parse(XSD).getroot()
    patterns = {t.get("name"): t.find(f"{XS}restriction/{XS}pattern").get("value") for t in root.findall(f"{XS}simpleType")}
    named = {t.get("name"): t for t in root.findall(f"{XS}complexType")}
    found: dict[str, Rule] = {}
    for element in root.findall(f"{XS}element"):
        rule = Rule()
        kind = element.find(f"{XS}complexType")
        if kind is None and element.get("type") in named:
            kind = named[element.get("type")]
        if kind is None:  # a simple type: text only
            rule.text = True
        else:
            rule.text = kind.get("mixed") == "true"
            for attribute in kind.iter(f"{XS}attribute"):
                rule.attributes[attribute.get("name")] = attribute.get("type", "xs:string")
                if attribute.get("use") == "required":
                    rule.required.add(attribute.get("name"))
            rule.children = {e.get("ref") or e.get("name") for e in kind.iter(f"{XS}element")}
        found[element.get("name")] = rule
    return found, patterns


def _check(node: ET.Element, table: dict[str, Rule], patterns: dict[str, str], where: str) -> None:
    rule = table.get(node.tag)
    assert rule is not None, f"{where}: <{node.tag}> is not in junit-10.xsd"
    for name, value in node.attrib.items():
        assert name in rule.attributes, f"{where}: <{node.tag}> has no attribute {name!r} in junit-10.xsd"
        pattern = patterns.get(rule.attributes[name])
        assert pattern is None or re.fullmatch(pattern, value), f"{where}: {name}={value!r} does not match {pattern}"
    missing = rule.required - set(node.attrib)
    assert not missing, f"{where}: <{node.tag}> lacks {sorted(missing)}"
    assert rule.text or not (node.text or "").strip(), f"{where}: <{node.tag}> may not hold text"
    for i, child in enumerate(node):
        assert child.tag in rule.children, f"{where}: <{child.tag}> may not be inside <{node.tag}>"
        assert rule.text or not (child.tail or "").strip(), f"{where}: text inside <{node.tag}>"
        _check(child, table, patterns, f"{where}/{child.tag}[{i}]")


def validate(xml: str | Path) -> None:
    """AssertionError (structural) or xmlschema's error unless `xml` (text or a file) is valid."""
    text = Path(xml).read_text(encoding="utf-8") if isinstance(xml, Path) else xml
    if xmlschema is not None:
        xmlschema.XMLSchema(str(XSD)).validate(text)
    root = ET.fromstring(text.encode("utf-8"))
    assert root.tag == "testsuites", root.tag
    table, patterns = rules()
    _check(root, table, patterns, "testsuites")
