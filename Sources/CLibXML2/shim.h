// libxml2's SAX2 parser, for the rss adapter: one call that parses a whole document from memory
// into the handler's callbacks, without the network and without keeping a tree.
#include <libxml/xmlversion.h>
// Debian builds libxml2 with ICU, whose headers clash with the copy inside Foundation; the only
// declarations that need them are an encoding handler's ICU converters, which feedd never touches.
#undef LIBXML_ICU_ENABLED
#include <libxml/parser.h>
#include <libxml/xmlerror.h>

/// Parses `length` bytes with `handler`, passing `context` to every callback. Returns 0 for a
/// well-formed document, else an libxml2 error code (the handler's `serror` has heard why).
static inline int feedd_xml_parse(xmlSAXHandler *handler, void *context, const char *bytes, int length) {
    xmlParserCtxtPtr parser = xmlCreatePushParserCtxt(handler, context, NULL, 0, NULL);
    if (parser == NULL) return -1;
    // NOENT makes libxml2 hand attribute values over decoded (`&amp;` as `&`, not `&#38;`); with
    // no entity declarations kept (the handler has no getEntity), only predefined entities and
    // character references can be substituted.
    xmlCtxtUseOptions(parser, XML_PARSE_NONET | XML_PARSE_NOWARNING | XML_PARSE_NOENT);
    int result = xmlParseChunk(parser, bytes, length, 1);
    if (result == 0 && !parser->wellFormed) result = -1;
    xmlFreeParserCtxt(parser);
    return result;
}
