"""Code lists: ICD-9-CM / ICD-10 prefixes per condition, and antibiotic names.

Codes are written without dots, as MIMIC-IV stores them; a listed code matches every
code that starts with it ("410" matches 41001). ``span("4254", "4259")`` is the range
4254, 4255, ..., 4259.
"""

from __future__ import annotations


def span(first: str, last: str) -> list[str]:
    """Codes from ``first`` to ``last`` with the same letter prefix and length."""
    head = first.rstrip("0123456789")
    if not last.startswith(head) or len(first) != len(last):
        raise ValueError(f"bad code span {first}-{last}")
    width = len(first) - len(head)
    return [f"{head}{n:0{width}d}" for n in range(int(first[len(head):]), int(last[len(head):]) + 1)]


def _codes(*parts: str | list[str]) -> tuple[str, ...]:
    out: list[str] = []
    for part in parts:
        out.extend(part if isinstance(part, list) else [part])
    return tuple(out)


# Charlson comorbidities: Quan H et al. Coding algorithms for defining comorbidities in ICD-9-CM
# and ICD-10 administrative data. Med Care 2005;43(11):1130-9 (Table 1, enhanced ICD-9-CM).
CHARLSON: dict[str, dict[int, tuple[str, ...]]] = {
    "myocardial_infarct": {9: _codes("410", "412"), 10: _codes("I21", "I22", "I252")},
    "congestive_heart_failure": {
        9: _codes("39891", "40201", "40211", "40291", "40401", "40403", "40411", "40413", "40491",
                  "40493", span("4254", "4259"), "428"),
        10: _codes("I099", "I110", "I130", "I132", "I255", "I420", span("I425", "I429"), "I43", "I50",
                   "P290"),
    },
    "peripheral_vascular_disease": {
        9: _codes("0930", "4373", "440", "441", span("4431", "4439"), "4471", "5571", "5579", "V434"),
        10: _codes("I70", "I71", "I731", "I738", "I739", "I771", "I790", "I792", "K551", "K558", "K559",
                   "Z958", "Z959"),
    },
    "cerebrovascular_disease": {
        9: _codes("36234", span("430", "438")),
        10: _codes("G45", "G46", "H340", span("I60", "I69")),
    },
    "dementia": {9: _codes("290", "2941", "3312"), 10: _codes(span("F00", "F03"), "F051", "G30", "G311")},
    "chronic_pulmonary_disease": {
        9: _codes("4168", "4169", span("490", "505"), "5064", "5081", "5088"),
        10: _codes("I278", "I279", span("J40", "J47"), span("J60", "J67"), "J684", "J701", "J703"),
    },
    "rheumatic_disease": {
        9: _codes("4465", span("7100", "7104"), span("7140", "7142"), "7148", "725"),
        10: _codes("M05", "M06", "M315", span("M32", "M34"), "M351", "M353", "M360"),
    },
    "peptic_ulcer_disease": {9: _codes(span("531", "534")), 10: _codes(span("K25", "K28"))},
    "mild_liver_disease": {
        9: _codes("07022", "07023", "07032", "07033", "07044", "07054", "0706", "0709", "570", "571",
                  "5733", "5734", "5738", "5739", "V427"),
        10: _codes("B18", span("K700", "K703"), "K709", span("K713", "K715"), "K717", "K73", "K74", "K760",
                   span("K762", "K764"), "K768", "K769", "Z944"),
    },
    "diabetes_without_cc": {
        9: _codes(span("2500", "2503"), "2508", "2509"),
        10: _codes(*[f"E1{d}{s}" for d in "01234" for s in "01689"]),
    },
    "diabetes_with_cc": {
        9: _codes(span("2504", "2507")),
        10: _codes(*[f"E1{d}{s}" for d in "01234" for s in "23457"]),
    },
    "paraplegia": {
        9: _codes("3341", "342", "343", span("3440", "3446"), "3449"),
        10: _codes("G041", "G114", "G801", "G802", "G81", "G82", span("G830", "G834"), "G839"),
    },
    "renal_disease": {
        9: _codes("40301", "40311", "40391", "40402", "40403", "40412", "40413", "40492", "40493", "582",
                  span("5830", "5837"), "585", "586", "5880", "V420", "V451", "V56"),
        10: _codes("I120", "I131", span("N032", "N037"), span("N052", "N057"), "N18", "N19", "N250",
                   span("Z490", "Z492"), "Z940", "Z992"),
    },
    "malignant_cancer": {
        9: _codes(span("140", "172"), span("174", "194"), span("1950", "1958"), span("200", "208"), "2386"),
        10: _codes(span("C00", "C26"), span("C30", "C34"), span("C37", "C41"), "C43", span("C45", "C58"),
                   span("C60", "C76"), span("C81", "C85"), "C88", span("C90", "C97")),
    },
    "severe_liver_disease": {
        9: _codes(span("4560", "4562"), span("5722", "5728")),
        10: _codes("I850", "I859", "I864", "I982", "K704", "K711", "K721", "K729", "K765", "K766", "K767"),
    },
    "metastatic_solid_tumor": {9: _codes(span("196", "199")), 10: _codes(span("C77", "C80"))},
    "aids": {9: _codes(span("042", "044")), 10: _codes(span("B20", "B22"), "B24")},
}

# CHA2DS2-VASc and HAS-BLED conditions (Lip 2010; Pisters 2010), coded as in claims-based studies.
HYPERTENSION = {9: _codes(span("401", "405")), 10: _codes(span("I10", "I16"))}
DIABETES = {9: _codes("250"), 10: _codes(span("E08", "E13"))}
CHF = {9: _codes("428", "39891", "40201", "40211", "40291", "40401", "40403", "40411", "40413", "40491",
                 "40493"),
       10: _codes("I50", "I110", "I130", "I132", "I0981")}
STROKE_TIA_TE = {  # ischaemic stroke, TIA, systemic thromboembolism, history of them
    9: _codes("43301", "43311", "43321", "43331", "43381", "43391", "43401", "43411", "43491", "435",
              "436", "444", "V1254"),
    10: _codes("I63", "G45", "I74", "Z8673"),
}
VASCULAR = {  # myocardial infarction, peripheral artery disease, aortic plaque
    9: _codes("410", "412", "4400", "4402", "4439"),
    10: _codes("I21", "I22", "I252", "I700", "I702", "I739"),
}
ATRIAL_FIBRILLATION = {9: _codes("42731"), 10: _codes("I48")}
STROKE_ANY = {  # HAS-BLED "S": ischaemic or haemorrhagic stroke, TIA, their history
    9: _codes("430", "431", "432", "43301", "43311", "43321", "43331", "43381", "43391", "43401", "43411",
              "43491", "435", "436", "V1254"),
    10: _codes("I60", "I61", "I62", "I63", "G45", "Z8673"),
}
BLEEDING = {  # major bleeding or predisposition (bleeding diathesis, thrombocytopenia, anaemia of blood loss)
    9: _codes("430", "431", "432", "4590", "578", "5310", "5312", "5314", "5316", "5320", "5322", "5324",
              "5326", "5330", "5332", "5334", "5336", "5340", "5342", "5344", "5346", "2851", "2800",
              "286", "287", "5997", "7847", "7863"),
    10: _codes("I60", "I61", "I62", "K920", "K921", "K922", "K250", "K252", "K254", "K256", "K260", "K262",
               "K264", "K266", "K270", "K272", "K274", "K276", "K280", "K282", "K284", "K286", "D62",
               "D500", span("D65", "D69"), "R31", "R04", "R58"),
}
RENAL_ABNORMAL = {  # dialysis, kidney transplant, end-stage renal disease
    9: _codes("V4511", "V4512", "V56", "V420", "5856"),
    10: _codes("Z992", "Z49", "Z940", "N186"),
}
LIVER_ABNORMAL = {  # cirrhosis and chronic hepatic disease
    9: _codes("5712", "5715", "5716", "5722", "5723", "5724", "4560", "4561", "4562"),
    10: _codes("K703", "K704", "K717", "K743", "K744", "K745", "K746", "K721", "K766", "I850", "I859"),
}
ALCOHOL = {
    9: _codes("291", "303", "3050", "3575", "4255", "5353", "5710", "5711", "5712", "5713", "980", "V113"),
    10: _codes("F10", "E52", "G621", "I426", "K292", "K70", "T51", "Z502", "Z714", "Z721"),
}

# Antibiotics in prescriptions.drug (lower case substrings; mimic-code antibiotic.sql, extended).
ANTIBIOTICS = (
    "adoxa", "ala-tet", "alodox", "amikacin", "amikin", "amoxicill", "ampicillin", "ancef", "augmentin",
    "avelox", "avidoxy", "azactam", "azithromycin", "aztreonam", "axetil", "bactocill", "bactrim",
    "bethkis", "biaxin", "bicillin l-a", "cayston", "cefazolin", "cedax", "cefoxitin", "ceftazidime",
    "cefaclor", "cefadroxil", "cefdinir", "cefditoren", "cefepime", "cefotan", "cefotetan", "cefotaxime",
    "ceftaroline", "cefpodoxime", "cefpirome", "cefprozil", "ceftibuten", "ceftin", "ceftriaxone",
    "cefuroxime", "cephalexin", "cephalothin", "cephapririn", "chloramphenicol", "cipro", "claforan",
    "clarithromycin", "cleocin", "clindamycin", "cubicin", "dicloxacillin", "dirithromycin", "doryx",
    "doxycy", "duricef", "dynacin", "ery-tab", "eryped", "eryc", "erythrocin", "erythromycin", "factive",
    "flagyl", "fortaz", "furadantin", "garamycin", "gentamicin", "kanamycin", "keflex", "kefzol", "levaquin",
    "levofloxacin", "lincocin", "linezolid", "macrobid", "macrodantin", "maxipime", "mefoxin",
    "metronidazole", "meropenem", "methicillin", "minocin", "minocycline", "monodox", "monurol",
    "morgidox", "moxatag", "moxifloxacin", "myrac", "nafcillin", "neomycin", "nitrofurantoin",
    "norfloxacin", "noroxin", "ocudox", "ofloxacin", "omnicef", "oracea", "oraxyl", "oxacillin",
    "pc pen vk", "pce dispertab", "penicillin", "periostat", "pfizerpen", "piperacillin", "tazobactam",
    "primsol", "proquin", "raniclor", "rifadin", "rifampin", "rocephin", "smz-tmp", "septra", "solodyn",
    "spectracef", "streptomycin", "sulfadiazine", "sulfamethoxazole", "trimethoprim", "sulfatrim",
    "sulfisoxazole", "suprax", "synercid", "tazicef", "tetracycline", "timentin", "tobramycin", "unasyn",
    "vancocin", "vancomycin", "vantin", "vibativ", "vibra-tabs", "vibramycin", "zinacef", "zithromax",
    "zosyn", "zyvox", "ertapenem", "imipenem", "daptomycin", "tigecycline", "ceftolozane", "colistin",
    "polymyxin", "aztreonam", "cefiderocol", "doripenem",
)
# Not systemic: eye/ear/topical routes and forms.
ANTIBIOTIC_EXCLUDED_ROUTES = ("ou", "os", "od", "au", "as", "ad", "tp", "ear", "eye", "both eyes",
                              "left eye", "right eye", "topical")
ANTIBIOTIC_EXCLUDED_FORMS = ("cream", "desensitization", "ophth oint", "gel", "ointment", "eye drops",
                             "ophth", "otic")

ANTIPLATELETS_NSAIDS = (
    "aspirin", "clopidogrel", "plavix", "prasugrel", "ticagrelor", "brilinta", "dipyridamole", "cilostazol",
    "ibuprofen", "naproxen", "ketorolac", "diclofenac", "indomethacin", "celecoxib", "meloxicam",
    "nabumetone", "etodolac", "piroxicam", "sulindac", "ketoprofen",
)
