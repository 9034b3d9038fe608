//===- JsonDocument.cpp - A parsed JSON file with value positions ---------===//
#include "JsonDocument.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/ConvertUTF.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace terra::json_import;
namespace json = llvm::json;

//===----------------------------------------------------------------------===//
// Paths
//===----------------------------------------------------------------------===//

llvm::raw_ostream &terra::json_import::operator<<(llvm::raw_ostream &os,
                                                  const JsonPath &path) {
  SmallVector<const JsonPath *> steps;
  for (const JsonPath *p = &path; p->parent; p = p->parent)
    steps.push_back(p);
  if (steps.empty())
    return os << "(top level)";
  for (auto [i, step] : llvm::enumerate(llvm::reverse(steps))) {
    if (step->isIndex) {
      os << '[' << step->index << ']';
      continue;
    }
    // Keys that would read as path syntax are quoted: args["a.b"].
    if (step->key.empty() ||
        step->key.find_first_of(".[]\" ") != StringRef::npos) {
      os << "[\"" << step->key << "\"]";
      continue;
    }
    if (i)
      os << '.';
    os << step->key;
  }
  return os;
}

Diagnostic &terra::json_import::operator<<(Diagnostic &diag,
                                           const JsonPath &path) {
  std::string str;
  llvm::raw_string_ostream os(str);
  os << path;
  return diag << llvm::Twine(str);
}

StringRef terra::json_import::describeKind(const json::Value &value) {
  switch (value.kind()) {
  case json::Value::Null:
    return "null";
  case json::Value::Boolean:
    return "a boolean";
  case json::Value::Number:
    return "a number";
  case json::Value::String:
    return "a string";
  case json::Value::Array:
    return "an array";
  case json::Value::Object:
    return "an object";
  }
  llvm_unreachable("unknown JSON kind");
}

//===----------------------------------------------------------------------===//
// Parsing
//===----------------------------------------------------------------------===//

JsonDocument::JsonDocument(StringRef text, StringRef bufferName,
                           MLIRContext *context)
    : context(context), text(text),
      bufferName(StringAttr::get(context, bufferName)) {
  llvm::Expected<json::Value> value = json::parse(text);
  if (value) {
    parsed.emplace(std::move(*value));
    return;
  }
  // ParseError keeps its position private; it logs it as
  // "[line:column, byte=offset]: message".
  llvm::handleAllErrors(value.takeError(), [&](const llvm::ErrorInfoBase &e) {
    std::string logged;
    llvm::raw_string_ostream os(logged);
    e.log(os);
    StringRef message = logged;
    size_t offset = 0;
    size_t byte = message.find("byte="), close = message.find("]: ");
    if (byte != StringRef::npos && close != StringRef::npos && byte < close &&
        !message.slice(byte + 5, close).getAsInteger(10, offset))
      message = message.drop_front(close + 3);
    // Most errors are found after reading the offending character: point
    // at it rather than at what follows.
    bool atOffender = message == "Text after end of document" ||
                      message == "Invalid UTF-8 sequence" ||
                      message == "Unexpected EOF";
    if (!atOffender && offset > 0 && offset < text.size())
      --offset;
    mlir::emitError(getLoc(std::min(offset, text.size())))
        << "invalid JSON: " << message;
  });
}

JsonNode JsonDocument::root() const {
  size_t offset = skipSpace(0);
  return JsonNode{&*parsed, offset, JsonPath{}, offset};
}

//===----------------------------------------------------------------------===//
// Positions
//===----------------------------------------------------------------------===//

static bool isSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

size_t JsonDocument::skipSpace(size_t pos) const {
  while (pos < text.size() && isSpace(text[pos]))
    ++pos;
  return pos;
}

size_t JsonDocument::skipString(size_t pos) const {
  for (++pos; pos < text.size(); ++pos) {
    if (text[pos] == '\\')
      ++pos;
    else if (text[pos] == '"')
      return pos + 1;
  }
  return text.size();
}

size_t JsonDocument::skipValue(size_t pos) const {
  if (pos >= text.size())
    return text.size();
  char c = text[pos];
  if (c == '"')
    return skipString(pos);
  if (c != '{' && c != '[') {
    // A number or a literal.
    while (pos < text.size() && !isSpace(text[pos]) &&
           !StringRef(",:]}").contains(text[pos]))
      ++pos;
    return pos;
  }
  unsigned depth = 0;
  while (pos < text.size()) {
    c = text[pos];
    if (c == '"') {
      pos = skipString(pos);
      continue;
    }
    if (c == '{' || c == '[')
      ++depth;
    else if ((c == '}' || c == ']') && --depth == 0)
      return pos + 1;
    ++pos;
  }
  return text.size();
}

/// Decodes the escapes of a JSON string body.
static std::string unescape(StringRef raw) {
  std::string out;
  auto hex4 = [&](size_t at, unsigned &cp) {
    return at + 4 <= raw.size() && !raw.substr(at, 4).getAsInteger(16, cp);
  };
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] != '\\' || i + 1 == raw.size()) {
      out += raw[i];
      continue;
    }
    char e = raw[++i];
    switch (e) {
    case 'b':
      out += '\b';
      break;
    case 'f':
      out += '\f';
      break;
    case 'n':
      out += '\n';
      break;
    case 'r':
      out += '\r';
      break;
    case 't':
      out += '\t';
      break;
    case 'u': {
      unsigned cp = 0, low = 0;
      if (!hex4(i + 1, cp))
        break;
      i += 4;
      if (cp >= 0xD800 && cp < 0xDC00 && i + 2 < raw.size() &&
          raw[i + 1] == '\\' && raw[i + 2] == 'u' && hex4(i + 3, low) &&
          low >= 0xDC00 && low < 0xE000) {
        cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        i += 6;
      }
      char buf[UNI_MAX_UTF8_BYTES_PER_CODE_POINT];
      char *end = buf;
      if (llvm::ConvertCodePointToUTF8(cp, end))
        out.append(buf, end);
      break;
    }
    default: // '"', '\\', '/'
      out += e;
    }
  }
  return out;
}

std::pair<size_t, size_t> JsonDocument::findMember(size_t pos,
                                                   StringRef key) const {
  std::pair<size_t, size_t> found(StringRef::npos, StringRef::npos);
  if (pos >= text.size() || text[pos] != '{')
    return found;
  // llvm::json keeps the last of duplicate keys: so does this.
  pos = skipSpace(pos + 1);
  while (pos < text.size() && text[pos] == '"') {
    size_t keyEnd = skipString(pos);
    StringRef raw = text.slice(pos + 1, keyEnd - 1);
    size_t value = skipSpace(keyEnd);
    if (value >= text.size() || text[value] != ':')
      break;
    value = skipSpace(value + 1);
    if (raw.contains('\\') ? unescape(raw) == key : raw == key)
      found = {pos, value};
    pos = skipSpace(skipValue(value));
    if (pos >= text.size() || text[pos] != ',')
      break;
    pos = skipSpace(pos + 1);
  }
  return found;
}

std::optional<JsonNode> JsonDocument::member(const JsonNode &object,
                                             StringRef key) const {
  const json::Object *obj = object.getAsObject();
  if (!obj)
    return std::nullopt;
  auto it = obj->find(key);
  if (it == obj->end())
    return std::nullopt;
  auto [keyOffset, offset] = findMember(object.offset, key);
  if (offset == StringRef::npos)
    keyOffset = offset = object.offset;
  // Key the path on the stored key: it lives as long as the document.
  return JsonNode{&it->second, offset,
                  JsonPath{&object.path, StringRef(it->first), 0, false},
                  keyOffset};
}

SmallVector<JsonNode> JsonDocument::elements(const JsonNode &array) const {
  SmallVector<JsonNode> out;
  const json::Array *arr = array.getAsArray();
  if (!arr)
    return out;
  size_t pos = array.offset;
  bool scan = pos < text.size() && text[pos] == '[';
  if (scan)
    pos = skipSpace(pos + 1);
  for (auto [i, element] : llvm::enumerate(*arr)) {
    size_t offset = scan ? pos : array.offset;
    out.push_back(JsonNode{
        &element, offset, JsonPath{&array.path, StringRef(), i, true}, offset});
    if (!scan)
      continue;
    pos = skipSpace(skipValue(pos));
    if (pos < text.size() && text[pos] == ',')
      pos = skipSpace(pos + 1);
    scan = pos < text.size();
  }
  return out;
}

bool JsonDocument::isIntegerLiteral(const JsonNode &number) const {
  if (number.value->kind() != json::Value::Number)
    return false;
  size_t pos = number.offset;
  if (pos >= text.size() || !(text[pos] == '-' || llvm::isDigit(text[pos])))
    return number.value->getAsUINT64().has_value(); // Position unknown.
  StringRef literal = text.slice(pos, skipValue(pos));
  return literal.find_first_of(".eE") == StringRef::npos;
}

std::string JsonDocument::describe(const JsonNode &node) const {
  json::Value::Kind kind = node.value->kind();
  size_t pos = node.offset;
  if (kind == json::Value::Array || kind == json::Value::Object ||
      pos >= text.size() || text[pos] == '{' || text[pos] == '[')
    return describeKind(*node.value).str();
  StringRef literal = text.slice(pos, skipValue(pos));
  if (literal.size() > 40)
    return (literal.take_front(37) + "...").str();
  return literal.str();
}

Location JsonDocument::getLoc(size_t offset) const {
  if (lineStarts.empty()) {
    lineStarts.push_back(0);
    for (size_t pos = 0; pos < text.size(); ++pos)
      if (text[pos] == '\n')
        lineStarts.push_back(pos + 1);
  }
  offset = std::min(offset, text.size());
  auto next = llvm::upper_bound(lineStarts, offset);
  size_t line = next - lineStarts.begin();
  size_t column = offset - *std::prev(next) + 1;
  return FileLineColLoc::get(bufferName, line, column);
}

Location JsonDocument::getLoc(const JsonNode &node) const {
  return getLoc(node.offset);
}

InFlightDiagnostic JsonDocument::emitError(const JsonNode &node) const {
  InFlightDiagnostic diag = mlir::emitError(getLoc(node));
  diag << node.path << ": ";
  return diag;
}

InFlightDiagnostic JsonDocument::emitErrorAtKey(const JsonNode &node) const {
  InFlightDiagnostic diag = mlir::emitError(getLoc(node.keyOffset));
  diag << node.path << ": ";
  return diag;
}
