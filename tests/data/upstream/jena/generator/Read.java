import java.nio.file.*;
import org.apache.jena.riot.*;
import org.apache.jena.sparql.core.*;
public class Read {
    public static void main(String[] a) throws Exception {
        for (String f : a) {
            DatasetGraph back = DatasetGraphFactory.create();
            Lang lang = f.endsWith(".rt") ? Lang.RDFTHRIFT : Lang.RDFPROTO;
            RDFParser.source(Paths.get(f)).lang(lang).parse(back);
            Gen.expected(back, Paths.get(f + ".nq"));
        }
    }
}
