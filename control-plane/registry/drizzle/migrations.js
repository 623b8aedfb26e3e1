import m0000 from "./0000_dry_magdalene.sql";
import m0001 from "./0001_medical_vindicator.sql";
import m0002 from "./0002_redundant_ted_forrester.sql";
import m0003 from "./0003_typical_malice.sql";
import journal from "./meta/_journal.json";

export default {
  journal,
  migrations: {
    m0000,
    m0001,
    m0002,
    m0003,
  },
};
