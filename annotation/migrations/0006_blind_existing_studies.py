# Data migration of issue 15 (h15): display images for studies stored before 0005.

from django.db import migrations

def blind_existing_studies(apps, schema_editor):  # type: ignore[no-untyped-def]
    """Existing studies get display variants (see annotation.services.display_images)."""
    from annotation.services.display_images import study_images_blind

    Study = apps.get_model("annotation", "Study")
    for study in Study.objects.order_by("pk"):
        study_images_blind(
            study=study,
            page_model=apps.get_model("annotation", "Page"),
            candidate_model=apps.get_model("annotation", "Candidate"),
            stored_model=apps.get_model("annotation", "StoredImage"),
        )

class Migration(migrations.Migration):
    """Its own migration: on PostgreSQL, rows updated in the migration that adds the foreign keys
    leave trigger events pending when their indexes are created."""

    dependencies = [
        ("annotation", "0005_display_images"),
    ]

    operations = [
        migrations.RunPython(blind_existing_studies, migrations.RunPython.noop),
    ]
