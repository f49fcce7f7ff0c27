import java.io.*;
import java.nio.charset.StandardCharsets;
import java.nio.file.*;
import java.util.*;
import org.apache.jena.graph.*;
import org.apache.jena.riot.*;
import org.apache.jena.riot.out.NodeFmtLib;
import org.apache.jena.sparql.core.*;
import org.apache.jena.sparql.sse.SSE;
import org.apache.jena.query.ARQ;

// Writes Jena's own RDF Thrift / RDF Protobuf files for each source, then reads each file
// back with Jena and prints the quads Jena sees (raw blank node labels) as expected N-Quads.
public class Gen {
    static String fmt(Node n) {
        if (n.isBlank()) return "_:" + n.getBlankNodeLabel();
        if (n.isNodeTriple()) {
            Triple t = n.getTriple();
            return "<<( " + fmt(t.getSubject()) + " " + fmt(t.getPredicate()) + " " + fmt(t.getObject()) + " )>>";
        }
        if (n.isLiteral()) {
            String lex = "\"" + org.apache.jena.atlas.lib.EscapeStr.stringEsc(n.getLiteralLexicalForm()) + "\"";
            String lang = n.getLiteralLanguage();
            if (lang != null && !lang.isEmpty()) return lex + "@" + lang;
            String dt = n.getLiteralDatatypeURI();
            if (dt.equals("http://www.w3.org/2001/XMLSchema#string")) return lex;
            return lex + "^^<" + dt + ">";
        }
        return NodeFmtLib.strNT(n);
    }
    static void expected(DatasetGraph dsg, Path out) throws IOException {
        List<String> lines = new ArrayList<>();
        dsg.find().forEachRemaining(q -> {
            String g = q.isDefaultGraph() ? "" : " " + fmt(q.getGraph());
            lines.add(fmt(q.getSubject()) + " " + fmt(q.getPredicate()) + " " + fmt(q.getObject()) + g + " .");
        });
        Collections.sort(lines);
        Files.write(out, lines, StandardCharsets.UTF_8);
    }
    public static void main(String[] a) throws Exception {
        ARQ.init();
        Path src = Paths.get(a[0]), dst = Paths.get(a[1]);
        Files.createDirectories(dst);
        String[][] prefixes = {{"rdf","http://www.w3.org/1999/02/22-rdf-syntax-ns#"},{"xsd","http://www.w3.org/2001/XMLSchema#"},
            {"rdfs","http://www.w3.org/2000/01/rdf-schema#"},{"ex","http://example.org/"},{"","http://example/"},{"ns","http://namespace/ns#"}};
        try (DirectoryStream<Path> ds = Files.newDirectoryStream(src)) {
            List<Path> files = new ArrayList<>(); ds.forEach(files::add); Collections.sort(files);
            for (Path p : files) {
                String name = p.getFileName().toString();
                String stem = name.substring(0, name.lastIndexOf('.'));
                String text = new String(Files.readAllBytes(p), StandardCharsets.UTF_8);
                DatasetGraph dsg;
                boolean isGraph = false;
                Graph graph = null;
                if (name.endsWith(".sse")) {
                    if (text.contains("(dataset")) dsg = SSE.parseDatasetGraph(text);
                    else {
                        graph = SSE.parseGraph(text);
                        if (name.equals("terms.sse")) for (String[] pr : prefixes) graph.getPrefixMapping().setNsPrefix(pr[0], pr[1]);
                        isGraph = true; dsg = null;
                    }
                } else if (name.endsWith(".ttl")) {
                    graph = RDFParser.fromString(text).lang(Lang.TTL).base("http://example/base/").toGraph();
                    isGraph = true; dsg = null;
                } else {
                    if (name.endsWith(".nq")) text = text.replace("<<(", "<<").replace(")>>", ">>");
                    dsg = DatasetGraphFactory.create();
                    RDFParser.fromString(text).lang(name.endsWith(".nq") ? Lang.NQUADS : Lang.TRIG).parse(dsg);
                }
                System.err.println(name + ": " + (isGraph ? graph.size() : dsg.stream().count()));
                RDFFormat[] formats = {RDFFormat.RDF_THRIFT, RDFFormat.RDF_THRIFT_VALUES, RDFFormat.RDF_PROTO, RDFFormat.RDF_PROTO_VALUES};
                String[] suffixes = {".rt", ".values.rt", ".rpb", ".values.rpb"};
                for (int i = 0; i < formats.length; i++) {
                    Path out = dst.resolve(stem + suffixes[i]);
                    try (OutputStream os = Files.newOutputStream(out)) {
                        if (isGraph) RDFDataMgr.write(os, graph, formats[i]);
                        else RDFDataMgr.write(os, dsg, formats[i]);
                    }
                    DatasetGraph back = DatasetGraphFactory.create();
                    RDFParser.source(out).lang(formats[i].getLang()).parse(back);
                    expected(back, dst.resolve(stem + suffixes[i] + ".nq"));
                }
            }
        }
    }
}
