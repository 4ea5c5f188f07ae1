// libxml2 for the rss adapter: its SAX2 parser over a document in memory or as it downloads, without
// the network and without keeping a tree; its URI resolution; its HTML parser, for plain-text summaries.
#include <libxml/xmlversion.h>
// Debian builds libxml2 with ICU, whose headers clash with the copy inside Foundation; the only
// declarations that need them are an encoding handler's ICU converters, which feedd never touches.
#undef LIBXML_ICU_ENABLED
#include <libxml/parser.h>
#include <libxml/parserInternals.h>
#include <libxml/xmlerror.h>
#include <libxml/uri.h>
#include <libxml/HTMLparser.h>
#include <string.h>

/// The part of a document libxml2 has not read yet.
typedef struct {
    const char *next;
    size_t left;
} feedd_xml_text;

/// libxml2's read callback: the next `length` bytes at most of the `feedd_xml_text` `context`.
static inline int feedd_xml_read(void *context, char *buffer, int length) {
    feedd_xml_text *text = (feedd_xml_text *)context;
    size_t count = text->left < (size_t)length ? text->left : (size_t)length;
    if (count == 0) return 0;
    memcpy(buffer, text->next, count);
    text->next += count;
    text->left -= count;
    return (int)count;
}

/// A parser for the UTF-8 XML that `read` gives from `source` (feedd_xml_read and a
/// `feedd_xml_text`, for a text in memory), which calls `handler` with `context`; NULL if libxml2
/// has no memory. `source`, and what it reads from, must stay until the parser is freed. Run it with feedd_xml_run, free
/// it with xmlFreeParserCtxt.
///
/// libxml2 reads the text 4,000 bytes at a time into a buffer it keeps small (as it reads a
/// file), not into a copy of the whole text, which for a 9 MB body was a 9 MB allocation and a
/// page fault per 4 KiB on the reading thread (perf). Reading it where it lies
/// (`xmlParserInputBufferCreateStatic`) is what libxml2 2.9.14 leaves as a TODO: tried, its
/// `xmlParserInputShrink` moves the buffer's start but not the input's, and it read back over
/// text near the end of a 9 MB document.
///
/// - NONET: nothing is ever fetched (no DTD, no external entity), and no DTD is loaded at all.
/// - NOENT: attribute values come decoded (`&amp;` as `&`); with no entity declarations kept (the
///   handler has no getEntity or entityDecl), only predefined entities and character references
///   can be substituted, so no declared entity is ever expanded.
/// - HUGE: no limit on the size of a text node or the document (the body limit bounds it), but
///   still no entity expansion, since none is ever declared to the parser.
/// - IGNORE_ENC: the caller has already turned the bytes into UTF-8, whatever the XML
///   declaration says.
static inline xmlParserCtxtPtr feedd_xml_parser(const xmlSAXHandler *handler, void *context, xmlInputReadCallback read, void *source) {
    xmlParserCtxtPtr parser = xmlCreateIOParserCtxt(NULL, NULL, read, NULL, source, XML_CHAR_ENCODING_NONE);
    if (parser == NULL) return NULL;
    memcpy(parser->sax, handler, sizeof(xmlSAXHandler));
    parser->userData = context;
    xmlCtxtUseOptions(parser, XML_PARSE_NONET | XML_PARSE_NOWARNING | XML_PARSE_NOENT | XML_PARSE_HUGE | XML_PARSE_IGNORE_ENC);
    return parser;
}

/// Parses the whole document; 0 when it is well-formed, else libxml2's error number (or -1).
static inline int feedd_xml_run(xmlParserCtxtPtr parser) {
    xmlParseDocument(parser);
    if (parser->wellFormed) return 0;
    return parser->errNo != 0 ? parser->errNo : -1;
}

/// Whether the parser is reading an attribute value right now (an entity reference there is not
/// part of any element's text).
static inline int feedd_xml_in_attribute(xmlParserCtxtPtr parser) {
    return parser->instate == XML_PARSER_ATTRIBUTE_VALUE;
}

/// `reference` resolved against `base` (RFC 3986), as a string to free with feedd_xml_free; NULL
/// when either does not parse as a URI.
static inline char *feedd_resolve_uri(const char *reference, const char *base) {
    return (char *)xmlBuildURI((const xmlChar *)reference, (const xmlChar *)base);
}

static inline void feedd_xml_free(void *pointer) {
    xmlFree(pointer);
}

/// Parses `length` bytes of UTF-8 HTML with `handler` (tolerantly, as browsers read HTML),
/// passing `context` to every callback. A `<meta charset>` inside cannot change the encoding.
static inline void feedd_html_parse(const htmlSAXHandler *handler, void *context, const char *bytes, int length) {
    htmlParserCtxtPtr parser = htmlCreateMemoryParserCtxt(bytes, length);
    if (parser == NULL) return;
    memcpy(parser->sax, handler, sizeof(htmlSAXHandler));
    parser->userData = context;
    htmlCtxtUseOptions(parser, HTML_PARSE_NONET | HTML_PARSE_NOERROR | HTML_PARSE_NOWARNING | HTML_PARSE_RECOVER
        | HTML_PARSE_NOIMPLIED | HTML_PARSE_IGNORE_ENC);
    xmlSwitchEncoding(parser, XML_CHAR_ENCODING_UTF8);
    htmlParseDocument(parser);
    htmlFreeParserCtxt(parser);
}

/// The code point of the HTML 4 entity `name` (`nbsp`, `eacute`), or 0 if HTML has no such entity.
static inline unsigned int feedd_html_entity(const char *name) {
    const htmlEntityDesc *entity = htmlEntityLookup((const xmlChar *)name);
    return entity != NULL ? entity->value : 0;
}
