"""Drug and microbiology vocabularies of the synthetic generator.

Drugs carry their route, strength, dose and dispensing form as a hospital pharmacy
would record them; ``boosts`` multiply a drug's weight for admissions with a
clinical flag (insulin for diabetes, antibiotics for infection, ...). Formulary,
GSN and NDC codes are synthetic.
"""

from __future__ import annotations

import zlib
from typing import NamedTuple


class Drug(NamedTuple):
    drug: str
    drug_type: str  # MAIN, BASE, ADDITIVE
    route: str
    formulary_drug_cd: str
    prod_strength: str
    dose_val_rx: str
    dose_unit_rx: str
    form_val_disp: str
    form_unit_disp: str
    doses_per_24_hrs: float | None  # None for one-time / as-needed orders
    weight: float
    boosts: dict[str, float] = {}

    @property
    def gsn(self) -> str | None:
        return None if self.drug_type == "BASE" else f"{zlib.crc32(self.drug.encode()) % 1_000_000:06d}"

    @property
    def ndc(self) -> str:
        if self.drug_type == "BASE":
            return "0"
        return f"{zlib.crc32((self.drug + self.route).encode()) % 100_000_000_000:011d}"


DRUGS: list[Drug] = [
    # fluids, flushes and bases
    Drug("Sodium Chloride 0.9%  Flush", "MAIN", "IV", "NACLFLUSH", "10 mL Syringe", "3", "mL", "1", "SYR", 3, 10),
    Drug("0.9% Sodium Chloride", "BASE", "IV", "NS1000", "1000mL Bag", "1000", "mL", "1", "BAG", 1, 6,
         {"dehydration": 3, "sepsis": 2}),
    Drug("Lactated Ringers", "BASE", "IV", "LR1000", "1000mL Bag", "1000", "mL", "1", "BAG", 1, 2.5, {"surgical": 3}),
    Drug("5% Dextrose", "BASE", "IV", "D5W250", "250mL Bag", "250", "mL", "1", "BAG", 1, 3),
    Drug("Bag", "BASE", "IV", "BAG", "Bag", "1", "BAG", "1", "BAG", 1, 2.5),
    Drug("Sodium Bicarbonate", "MAIN", "IV", "NAHCO3I", "50mEq Vial", "50", "mEq", "1", "VIAL", None, 0.1,
         {"acidosis": 15, "dka": 5}),
    # electrolytes
    Drug("Magnesium Sulfate", "MAIN", "IV", "MAG2PM", "2 g / 50 mL Premix Bag", "2", "gm", "1", "BAG", None, 4,
         {"hypoMg": 5, "cardiac_surgery": 3}),
    Drug("Potassium Chloride", "MAIN", "PO", "KCL20P", "20mEq Packet", "40", "mEq", "2", "PKT", None, 4, {"hypoK": 6}),
    Drug("Potassium Chloride", "MAIN", "IV", "KCL20PM", "20mEq/50mL Premix", "20", "mEq", "1", "BAG", None, 2.5,
         {"hypoK": 6, "dka": 5}),
    Drug("Calcium Gluconate", "MAIN", "IV", "CALG1I", "1g/10mL Vial", "2", "g", "2", "VIAL", None, 1.5, {"hypoCa": 5}),
    Drug("Neutra-Phos", "MAIN", "PO", "NEUT", "Powder Packet", "1", "PKT", "1", "PKT", 2, 0.8),
    # gastrointestinal
    Drug("Docusate Sodium", "MAIN", "PO", "DOCU100", "100mg Capsule", "100", "mg", "1", "CAP", 2, 5),
    Drug("Senna", "MAIN", "PO", "SENN187", "8.6 mg Tablet", "8.6", "mg", "1", "TAB", 2, 5),
    Drug("Polyethylene Glycol", "MAIN", "PO", "GLYC17", "17g Packet", "17", "g", "1", "PKT", 1, 4),
    Drug("Bisacodyl", "MAIN", "PR", "BISA10R", "10mg Suppository", "10", "mg", "1", "SUPP", 1, 2.5),
    Drug("Ondansetron", "MAIN", "IV", "ONDA4I", "2mg/mL-2mL Vial", "4", "mg", "1", "VIAL", None, 4, {"bowel": 3}),
    Drug("Pantoprazole", "MAIN", "PO", "PANT40", "40mg Tablet", "40", "mg", "1", "TAB", 1, 4, {"gi_bleed": 4}),
    Drug("Pantoprazole", "MAIN", "IV", "PANT40I", "40mg Vial", "40", "mg", "1", "VIAL", 2, 1, {"gi_bleed": 15, "vent": 3}),
    Drug("Famotidine", "MAIN", "PO", "FAMO20", "20 mg Tablet", "20", "mg", "1", "TAB", 2, 1.5),
    Drug("Lactulose", "MAIN", "PO", "LACT30L", "30 mL Cup", "30", "mL", "1", "UDCUP", 3, 0.2, {"liver": 25}),
    Drug("Rifaximin", "MAIN", "PO", "RIFA550", "550 mg Tablet", "550", "mg", "1", "TAB", 2, 0.05, {"liver": 25}),
    # diabetes
    Drug("Insulin", "MAIN", "SC", "INSULIN", "100 Units / mL - 10 mL Vial", "0", "UNIT", "0", "mL", 4, 1.5,
         {"dm": 12, "hyperglycemia": 5, "cardiac_surgery": 4}),
    Drug("Insulin Glargine", "MAIN", "SC", "GLAR100I", "100 Units / mL - 10 mL Vial", "20", "UNIT", "0.2", "mL", 1, 0.3,
         {"dm": 12}),
    Drug("Glucagon", "MAIN", "IM", "GLUC1I", "1mg Vial", "1", "mg", "1", "VIAL", None, 0.5, {"dm": 6}),
    Drug("Dextrose 50%", "MAIN", "IV", "DEX50SY", "25 g / 50 mL Syringe", "12.5", "gm", "0.5", "SYR", None, 0.5,
         {"dm": 6, "hypoglycemia": 10}),
    Drug("MetFORMIN (Glucophage)", "MAIN", "PO", "METF500", "500 mg Tablet", "500", "mg", "1", "TAB", 2, 0.2, {"dm": 15}),
    # cardiovascular
    Drug("Metoprolol Tartrate", "MAIN", "PO", "METO25", "25mg Tablet", "25", "mg", "1", "TAB", 2, 2,
         {"afib": 5, "cad": 3, "htn": 2, "acs": 4}),
    Drug("Metoprolol Tartrate", "MAIN", "IV", "METO5I", "5mg/5mL Vial", "5", "mg", "1", "VIAL", None, 0.5, {"afib": 6}),
    Drug("Metoprolol Succinate XL", "MAIN", "PO", "METS25", "25mg XL Tab", "50", "mg", "2", "TAB", 1, 1, {"chf": 5, "htn": 2}),
    Drug("Aspirin", "MAIN", "PO", "ASA81", "81mg Tab", "81", "mg", "1", "TAB", 1, 2.5, {"cad": 5, "acs": 8, "neuro": 2}),
    Drug("Atorvastatin", "MAIN", "PO", "ATOR40", "40mg Tablet", "40", "mg", "1", "TAB", 1, 1.5, {"cad": 5, "acs": 8}),
    Drug("Simvastatin", "MAIN", "PO", "SIMV20", "20mg Tablet", "20", "mg", "1", "TAB", 1, 0.8, {"cad": 3}),
    Drug("Lisinopril", "MAIN", "PO", "LISI10", "10mg Tablet", "10", "mg", "1", "TAB", 1, 1.5, {"htn": 4, "chf": 3}),
    Drug("Amlodipine", "MAIN", "PO", "AMLO5", "5mg Tablet", "5", "mg", "1", "TAB", 1, 1.2, {"htn": 5}),
    Drug("HydrALAZINE", "MAIN", "IV", "HYDR20I", "20mg/mL Vial", "10", "mg", "0.5", "VIAL", None, 0.5, {"htn": 4}),
    Drug("Furosemide", "MAIN", "IV", "FURO20I", "20mg/2mL Vial", "40", "mg", "2", "VIAL", 2, 1.5, {"chf": 6, "chf_exac": 10}),
    Drug("Furosemide", "MAIN", "PO", "FURO20", "20mg Tablet", "40", "mg", "2", "TAB", 1, 1, {"chf": 6}),
    Drug("Spironolactone", "MAIN", "PO", "SPIR25", "25mg Tablet", "50", "mg", "2", "TAB", 1, 0.2, {"liver": 10, "chf": 3}),
    Drug("Clopidogrel", "MAIN", "PO", "CLOP75", "75mg Tablet", "75", "mg", "1", "TAB", 1, 0.3, {"acs": 20, "cad": 3}),
    Drug("Warfarin", "MAIN", "PO", "WARF5", "5mg Tablet", "5", "mg", "1", "TAB", 1, 0.2, {"anticoag": 20}),
    Drug("Apixaban", "MAIN", "PO", "APIX5", "5 mg Tablet", "5", "mg", "1", "TAB", 2, 0.2, {"anticoag": 20}),
    Drug("Heparin", "MAIN", "SC", "HEPA5I", "5000 Units / mL- 1mL Vial", "5000", "UNIT", "1", "mL", 3, 6,
         {"anticoag": 0.1, "bleeding": 0.1}),
    Drug("Heparin Sodium", "MAIN", "IV DRIP", "HEPPREMIX", "25,000 unit Premix Bag", "25000", "UNIT", "1", "BAG", None,
         0.1, {"pe": 30, "acs": 20}),
    Drug("Enoxaparin Sodium", "MAIN", "SC", "ENOX40", "40mg/0.4mL Syringe", "40", "mg", "1", "SYR", 1, 1.2,
         {"surgical": 3, "trauma": 3, "anticoag": 0.2}),
    Drug("Amiodarone", "MAIN", "PO", "AMID200", "200 mg Tab", "400", "mg", "2", "TAB", 2, 0.1, {"afib": 15}),
    Drug("Diltiazem", "MAIN", "PO", "DILT30", "30 mg Tablet", "30", "mg", "1", "TAB", 4, 0.1, {"afib": 12}),
    Drug("Digoxin", "MAIN", "PO", "DIGO125", "0.125mg Tablet", "0.125", "mg", "1", "TAB", 1, 0.05, {"afib": 6, "chf": 3}),
    Drug("Nitroglycerin SL", "MAIN", "SL", "NTG4SL", "0.4mg SL Tab", "0.4", "mg", "1", "TAB", None, 0.3, {"acs": 15, "cad": 3}),
    Drug("NORepinephrine", "MAIN", "IV DRIP", "NORE4I", "4 mg / 250 mL Bag", "0.06", "mcg/kg/min", "1", "BAG", None,
         0.02, {"shock": 60}),
    Drug("Labetalol", "MAIN", "IV", "LABE20I", "20mg/4mL Vial", "10", "mg", "0.5", "VIAL", None, 0.1, {"neuro": 8}),
    # infection
    Drug("Vancomycin", "MAIN", "IV", "VANC1F", "1g Frozen Bag", "1000", "mg", "1", "BAG", 2, 0.5, {"infection": 12}),
    Drug("Piperacillin-Tazobactam", "MAIN", "IV", "ZOSY4FPB", "4.5 g Frozen Bag", "4.5", "g", "1", "BAG", 3, 0.3,
         {"infection": 12}),
    Drug("CefTRIAXone", "MAIN", "IV", "CEFX1F", "1g Frozen Bag", "1", "g", "1", "BAG", 1, 0.4, {"infection": 10}),
    Drug("CefePIME", "MAIN", "IV", "CEFE2F", "2g Frozen Bag", "2", "g", "1", "BAG", 2, 0.2, {"infection": 8, "neutropenia": 30}),
    Drug("Meropenem", "MAIN", "IV", "MERO1I", "1000mg Vial", "1000", "mg", "1", "VIAL", 3, 0.05, {"sepsis": 10, "neutropenia": 10}),
    Drug("MetroNIDAZOLE", "MAIN", "IV", "METR500PM", "500mg Premix Bag", "500", "mg", "1", "BAG", 3, 0.15,
         {"infection": 5, "bowel": 3, "cdiff": 10}),
    Drug("Vancomycin Oral Liquid", "MAIN", "PO", "VANCO125L", "125 mg Cup", "125", "mg", "1", "UDCUP", 4, 0.01, {"cdiff": 300}),
    Drug("Ciprofloxacin HCl", "MAIN", "PO", "CIPR500", "500mg Tablet", "500", "mg", "1", "TAB", 2, 0.15, {"infection": 6, "uti": 6}),
    Drug("Azithromycin", "MAIN", "PO", "AZIT250", "250 mg Tab", "500", "mg", "2", "TAB", 1, 0.1, {"resp": 10, "copd": 4}),
    Drug("CefazoLIN", "MAIN", "IV", "CEFA2F", "2 g Frozen Bag", "2", "g", "1", "BAG", 3, 0.2, {"surgical": 15}),
    Drug("Sulfamethoxazole-Trimethoprim", "MAIN", "PO", "BACTRIMD", "800mg-160mg Tablet", "1", "TAB", "1", "TAB", 2, 0.15,
         {"infection": 4, "uti": 4}),
    Drug("Nitrofurantoin Monohyd (MacroBID)", "MAIN", "PO", "NITR100", "100mg Capsule", "100", "mg", "1", "CAP", 2, 0.05,
         {"uti": 20}),
    # analgesia, sedation, psychiatry
    Drug("Acetaminophen", "MAIN", "PO", "ACET325", "325mg Tablet", "650", "mg", "2", "TAB", 4, 8, {"pain": 2, "fever": 2}),
    Drug("OxyCODONE (Immediate Release)", "MAIN", "PO", "OXYC5", "5mg Tablet", "5", "mg", "1", "TAB", None, 2,
         {"pain": 4, "surgical": 4, "trauma": 4}),
    Drug("HYDROmorphone (Dilaudid)", "MAIN", "IV", "HYDR1I", "1mg/mL Syringe", "0.5", "mg", "0.5", "mL", None, 1,
         {"pain": 3, "surgical": 4}),
    Drug("Morphine Sulfate", "MAIN", "IV", "MORP2I", "2 mg Syringe", "2", "mg", "1", "SYR", None, 0.6, {"acs": 3, "pain": 2}),
    Drug("Fentanyl Citrate", "MAIN", "IV", "FENT2I", "100mcg/2mL Amp", "50", "mcg", "1", "mL", None, 0.3,
         {"vent": 10, "surgical": 2}),
    Drug("Propofol", "MAIN", "IV DRIP", "PROP100IG", "1000mg/100mL Vial", "1000", "mg", "1", "VIAL", None, 0.02, {"vent": 60}),
    Drug("TraMADol", "MAIN", "PO", "TRAM50", "50mg Tablet", "50", "mg", "1", "TAB", 4, 0.5, {"pain": 3}),
    Drug("Lidocaine 5% Patch", "MAIN", "TD", "LIDO5T", "Patch", "1", "PTCH", "1", "PTCH", 1, 0.6, {"pain": 3, "trauma": 4}),
    Drug("Ibuprofen", "MAIN", "PO", "IBUP600", "600mg Tablet", "600", "mg", "1", "TAB", 4, 0.3, {"obstetric": 40, "pain": 2}),
    Drug("LORazepam", "MAIN", "IV", "LORA2I", "2mg/mL Syringe", "1", "mg", "0.5", "mL", None, 0.4, {"withdrawal": 25, "neuro": 3}),
    Drug("LORazepam", "MAIN", "PO", "LORA1", "1mg Tablet", "0.5", "mg", "0.5", "TAB", None, 0.5, {"psych": 3}),
    Drug("Haloperidol", "MAIN", "IV", "HALO5I", "5mg/mL Vial", "2.5", "mg", "0.5", "mL", None, 0.2, {"delirium": 12}),
    Drug("QUEtiapine Fumarate", "MAIN", "PO", "QUET25", "25mg Tablet", "25", "mg", "1", "TAB", 1, 0.4,
         {"delirium": 6, "psych": 5}),
    Drug("Sertraline", "MAIN", "PO", "SERT50", "50mg Tablet", "50", "mg", "1", "TAB", 1, 0.3, {"psych": 10}),
    Drug("OLANZapine", "MAIN", "PO", "OLAN5", "5 mg Tablet", "5", "mg", "1", "TAB", 1, 0.1, {"psych": 15}),
    Drug("Thiamine", "MAIN", "PO", "THIA100", "100mg Tablet", "100", "mg", "1", "TAB", 1, 0.3, {"alcohol": 20}),
    Drug("FoLIC Acid", "MAIN", "PO", "FOLI1", "1 mg Tab", "1", "mg", "1", "TAB", 1, 0.3, {"alcohol": 15}),
    Drug("Multivitamins", "MAIN", "PO", "MVI", "1 Tablet", "1", "TAB", "1", "TAB", 1, 0.5, {"alcohol": 10}),
    # respiratory
    Drug("Albuterol 0.083% Neb Soln", "MAIN", "IH", "ALBU3H", "0.083%;3mL Vial", "1", "NEB", "1", "VIAL", 4, 0.5,
         {"copd": 10, "resp": 4}),
    Drug("Ipratropium Bromide Neb", "MAIN", "IH", "IPRA2H", "0.02% 2.5mL Vial", "1", "NEB", "1", "VIAL", 4, 0.2, {"copd": 12}),
    Drug("PredniSONE", "MAIN", "PO", "PRED10", "10 mg Tab", "40", "mg", "4", "TAB", 1, 0.2, {"copd": 10}),
    Drug("MethylPREDNISolone Sodium Succ", "MAIN", "IV", "METH125I", "125 mg Vial", "125", "mg", "1", "VIAL", 2, 0.05,
         {"copd": 10, "resp": 3}),
    Drug("Chlorhexidine Gluconate 0.12% Oral Rinse", "MAIN", "ORAL", "CHLO15L", "15 mL Cup", "15", "mL", "1", "UDCUP", 2,
         0.1, {"vent": 40}),
    # other
    Drug("Levothyroxine Sodium", "MAIN", "PO", "LEVO50", "50mcg Tablet", "75", "mcg", "1.5", "TAB", 1, 0.2, {"hypothyroid": 30}),
    Drug("Sevelamer CARBONATE", "MAIN", "PO", "SEVE800", "800 mg Tablet", "800", "mg", "1", "TAB", 3, 0.05,
         {"esrd": 30, "ckd": 3}),
    Drug("Epoetin Alfa", "MAIN", "SC", "EPOE10I", "10,000 unit/mL Vial", "10000", "UNIT", "1", "mL", None, 0.02, {"esrd": 20}),
    Drug("Allopurinol", "MAIN", "PO", "ALLO100", "100mg Tab", "100", "mg", "1", "TAB", 1, 0.2, {"heme_onc": 8}),
    Drug("LevETIRAcetam", "MAIN", "PO", "LEVE500", "500mg Tablet", "500", "mg", "1", "TAB", 2, 0.1, {"neuro": 12}),
    Drug("Ferrous Sulfate", "MAIN", "PO", "FERR325", "325 mg Tablet", "325", "mg", "1", "TAB", 1, 0.3, {"anemia": 8}),
    Drug("Oxytocin", "MAIN", "IV DRIP", "OXYT30", "30 Units / 500 mL Bag", "30", "UNIT", "1", "BAG", None, 0.001,
         {"obstetric": 5000}),
    Drug("Influenza Vaccine Quadrivalent", "MAIN", "IM", "INFLQUAD", "0.5 mL Syringe", "0.5", "mL", "1", "SYR", None, 0.4),
]

EMAR_EVENTS = [("Administered", 0.88), ("Not Given", 0.06), ("Delayed Administered", 0.03), ("Confirmed", 0.03)]


# --- microbiology ------------------------------------------------------------------------

class Specimen(NamedTuple):
    spec_itemid: int
    spec_type_desc: str
    weight: float
    boosts: dict[str, float]
    tests: tuple[tuple[int, str], ...]  # the last test is the culture that grows organisms
    p_positive: float
    positive_boosts: dict[str, float]
    organisms: dict[int, float]  # org_itemid -> weight
    negative_comment: str


ECOLI, KPNEU, KOXY, SERR, PROT, SAUR, PSAE, ENTC, YEAST, CDIF, CONS, SANG, VIRI, ACIN, ENTB, MIXED = (
    80002, 80004, 80005, 80014, 80017, 80023, 80026, 80053, 80075, 80139, 80155, 80235, 80280, 80304, 90763, 90785)

GRAM_STAIN = (90270, "GRAM STAIN")

SPECIMENS: list[Specimen] = [
    Specimen(70012, "BLOOD CULTURE", 0.34, {"infection": 1.5, "sepsis": 2.0}, ((90201, "Blood Culture, Routine"),),
             0.07, {"sepsis": 0.12, "bacteremia": 0.7},
             {SAUR: 0.2, CONS: 0.3, ECOLI: 0.2, KPNEU: 0.1, ENTC: 0.08, PSAE: 0.04, VIRI: 0.04, YEAST: 0.04}, "NO GROWTH."),
    Specimen(70079, "URINE", 0.28, {"uti": 3.0}, ((90039, "URINE CULTURE"),), 0.22, {"uti": 0.55},
             {ECOLI: 0.45, KPNEU: 0.15, PROT: 0.08, ENTC: 0.12, PSAE: 0.07, KOXY: 0.03, ENTB: 0.04, YEAST: 0.06},
             "NO GROWTH."),
    Specimen(70062, "SPUTUM", 0.09, {"resp": 4.0, "vent": 3.0}, (GRAM_STAIN, (90055, "RESPIRATORY CULTURE")), 0.35,
             {"resp": 0.25},
             {SAUR: 0.25, PSAE: 0.2, KPNEU: 0.12, ECOLI: 0.08, ENTB: 0.06, SERR: 0.05, ACIN: 0.04, YEAST: 0.2},
             "SPARSE GROWTH Commensal Respiratory Flora."),
    Specimen(70091, "MRSA SCREEN", 0.14, {"vent": 1.5}, ((90189, "MRSA SCREEN"),), 0.08, {}, {SAUR: 1.0},
             "No MRSA isolated."),
    Specimen(70064, "STOOL", 0.06, {"cdiff": 8.0, "bowel": 2.0}, ((90221, "C. difficile PCR"),), 0.08, {"cdiff": 0.85},
             {CDIF: 1.0}, "Negative for toxigenic C. difficile by nucleic acid amplification.  (Reference Range-Negative)."),
    Specimen(70070, "SWAB", 0.05, {"surgical": 2.0, "trauma": 1.5}, ((90046, "WOUND CULTURE"),), 0.35, {},
             {SAUR: 0.35, MIXED: 0.2, ECOLI: 0.1, PSAE: 0.1, ENTC: 0.1, SANG: 0.15}, "No significant growth."),
    Specimen(70021, "BRONCHOALVEOLAR LAVAGE", 0.02, {"vent": 4.0}, (GRAM_STAIN, (90055, "RESPIRATORY CULTURE")), 0.4,
             {"resp": 0.2}, {SAUR: 0.25, PSAE: 0.25, KPNEU: 0.15, ENTB: 0.1, ACIN: 0.05, YEAST: 0.2},
             "NO GROWTH, <1000 CFU/ml."),
    Specimen(70053, "PERITONEAL FLUID", 0.01, {"liver": 30.0}, (GRAM_STAIN, (90268, "FLUID CULTURE")), 0.12, {},
             {ECOLI: 0.3, KPNEU: 0.2, ENTC: 0.2, SAUR: 0.15, YEAST: 0.15}, "NO GROWTH."),
]

GRAM_STAIN_NEGATIVE = "NO POLYMORPHONUCLEAR LEUKOCYTES SEEN.  NO MICROORGANISMS SEEN."
GRAM_STAIN_POSITIVE = "2+   (1-5 per 1000X FIELD):   POLYMORPHONUCLEAR LEUKOCYTES.  1+    (<1 per 1000X FIELD):   MICROORGANISMS SEEN."

# org_itemid -> (org_name, susceptibility panel or None)
ORGANISMS: dict[int, tuple[str, str | None]] = {
    ECOLI: ("ESCHERICHIA COLI", "gram_negative"), KPNEU: ("KLEBSIELLA PNEUMONIAE", "gram_negative"),
    KOXY: ("KLEBSIELLA OXYTOCA", "gram_negative"), SERR: ("SERRATIA MARCESCENS", "gram_negative"),
    PROT: ("PROTEUS MIRABILIS", "gram_negative"), ENTB: ("ENTEROBACTER CLOACAE COMPLEX", "gram_negative"),
    ACIN: ("ACINETOBACTER BAUMANNII COMPLEX", "pseudomonas"), PSAE: ("PSEUDOMONAS AERUGINOSA", "pseudomonas"),
    SAUR: ("STAPH AUREUS COAG +", "staph"), CONS: ("STAPHYLOCOCCUS, COAGULASE NEGATIVE", "staph"),
    ENTC: ("ENTEROCOCCUS SP.", "enterococcus"), YEAST: ("YEAST", None), CDIF: ("CLOSTRIDIUM DIFFICILE", None),
    SANG: ("STREPTOCOCCUS ANGINOSUS (MILLERI) GROUP", None), VIRI: ("VIRIDANS STREPTOCOCCI", None),
    MIXED: ("MIXED BACTERIAL FLORA", None),
}

# ab_itemid -> (ab_name, susceptible MIC, resistant MIC)
ANTIBIOTICS: dict[int, tuple[str, float, float]] = {
    90003: ("PENICILLIN G", 0.06, 0.5), 90004: ("AMPICILLIN", 2, 32), 90005: ("CEFAZOLIN", 4, 64),
    90006: ("ERYTHROMYCIN", 0.25, 8), 90007: ("CLINDAMYCIN", 0.25, 8), 90008: ("TRIMETHOPRIM/SULFA", 1, 16),
    90010: ("NITROFURANTOIN", 16, 512), 90011: ("TETRACYCLINE", 1, 16), 90012: ("GENTAMICIN", 1, 16),
    90013: ("TOBRAMYCIN", 1, 16), 90014: ("AMIKACIN", 2, 64), 90015: ("VANCOMYCIN", 1, 32),
    90016: ("OXACILLIN", 0.25, 4), 90017: ("CEFTAZIDIME", 1, 64), 90018: ("CEFTRIAXONE", 1, 64),
    90019: ("CIPROFLOXACIN", 0.25, 4), 90022: ("AMPICILLIN/SULBACTAM", 2, 32), 90025: ("LEVOFLOXACIN", 0.12, 8),
    90026: ("PIPERACILLIN/TAZO", 4, 128), 90027: ("RIFAMPIN", 0.5, 4), 90028: ("CEFEPIME", 1, 64),
    90029: ("MEROPENEM", 0.25, 16), 90030: ("DAPTOMYCIN", 1, 8), 90031: ("LINEZOLID", 2, 8),
}

# panel -> [(ab_itemid, probability resistant)]
SUSCEPTIBILITY_PANELS: dict[str, list[tuple[int, float]]] = {
    "gram_negative": [(90004, 0.55), (90022, 0.35), (90005, 0.25), (90018, 0.15), (90017, 0.12), (90028, 0.1),
                      (90026, 0.08), (90029, 0.02), (90019, 0.25), (90012, 0.1), (90013, 0.1), (90008, 0.28),
                      (90010, 0.1)],
    "pseudomonas": [(90017, 0.15), (90028, 0.15), (90026, 0.15), (90029, 0.12), (90019, 0.25), (90012, 0.12),
                    (90013, 0.08), (90014, 0.05)],
    "staph": [(90016, 0.45), (90015, 0.0), (90007, 0.3), (90006, 0.55), (90011, 0.08), (90008, 0.05), (90012, 0.03),
              (90025, 0.4), (90027, 0.01)],
    "enterococcus": [(90004, 0.2), (90015, 0.25), (90031, 0.02), (90030, 0.02), (90010, 0.05), (90003, 0.25)],
}
