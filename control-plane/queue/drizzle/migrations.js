import m0000 from "./0000_nosy_azazel.sql";
import m0001 from "./0001_cute_moira_mactaggert.sql";
import m0002 from "./0002_unknown_warstar.sql";
import m0003 from "./0003_loan_columns.sql";
import m0004 from "./0004_spicy_pet_avengers.sql";
import journal from "./meta/_journal.json";

export default {
  journal,
  migrations: {
    m0000,
    m0001,
    m0002,
    m0003,
    m0004,
  },
};
