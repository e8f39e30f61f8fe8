# A brief's verifiable requirements and an output's rule score (docs/protocol.md "AesCode's rule score").

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0020_upload_new_study_run_progress'),
    ]

    operations = [
        migrations.AddField(
            model_name='page',
            name='requirements',
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.AddField(
            model_name='candidate',
            name='rule',
            field=models.JSONField(blank=True, default=dict),
        ),
    ]
